package schemas

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// SchemaMetadataKey is the Arrow schema metadata key naming a table's
// format and version, e.g. "ilb.schema": "features/v1".
const SchemaMetadataKey = "ilb.schema"

// column maps one field of a row type T to one Arrow column. Columns are
// filled and read whole (column-major), so each does one type assertion
// per batch, not per value.
type column[T any] struct {
	field  arrow.Field
	append func(b array.Builder, rows []T)
	read   func(a arrow.Array, rows []T) error
	// optional: a column added to a table after v1 was first written; a
	// record without it (from an older writer) reads as zero values.
	optional bool
}

func tableSchema[T any](version string, cols []column[T]) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.field
	}
	md := arrow.NewMetadata([]string{SchemaMetadataKey}, []string{version})
	return arrow.NewSchema(fields, &md)
}

func toRecord[T any](mem memory.Allocator, schema *arrow.Schema, cols []column[T], rows []T) arrow.RecordBatch {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Reserve(len(rows))
	for i, c := range cols {
		c.append(b.Field(i), rows)
	}
	return b.NewRecordBatch()
}

// fromRecord checks the version and finds each expected column by name
// with the expected type (an optional column may be missing); extra columns, column order and a nullable flag
// on a column that holds no nulls are all tolerated, so that other
// writers (pyarrow, DuckDB) and later minor additions interoperate.
func fromRecord[T any](rec arrow.RecordBatch, version string, cols []column[T]) ([]T, error) {
	if rec == nil {
		return nil, fmt.Errorf("%w: nil record", ErrSchemaMismatch)
	}
	sc := rec.Schema()
	if got, _ := sc.Metadata().GetValue(SchemaMetadataKey); got != version {
		return nil, fmt.Errorf("%w: metadata %s is %q, want %q", ErrSchemaMismatch, SchemaMetadataKey, got, version)
	}
	rows := make([]T, rec.NumRows())
	for _, c := range cols {
		idx := sc.FieldIndices(c.field.Name)
		if len(idx) == 0 && c.optional {
			continue
		}
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: %s: column %q appears %d times, want once", ErrSchemaMismatch, version, c.field.Name, len(idx))
		}
		if got := sc.Field(idx[0]).Type; !arrow.TypeEqual(got, c.field.Type) {
			return nil, fmt.Errorf("%w: %s: column %q is %s, want %s", ErrSchemaMismatch, version, c.field.Name, got, c.field.Type)
		}
		col := rec.Column(idx[0])
		if !c.field.Nullable && col.NullN() > 0 {
			return nil, fmt.Errorf("%w: %s: column %q has %d nulls", ErrSchemaMismatch, version, c.field.Name, col.NullN())
		}
		if err := c.read(col, rows); err != nil {
			return nil, fmt.Errorf("%w: %s: column %q: %w", ErrSchemaMismatch, version, c.field.Name, err)
		}
	}
	return rows, nil
}

func arrayAs[A arrow.Array](a arrow.Array) (A, error) {
	typed, ok := a.(A)
	if !ok {
		return typed, fmt.Errorf("array is %T", a)
	}
	return typed, nil
}

func f64Col[T any](name string, field func(*T) *float64) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64},
		append: func(b array.Builder, rows []T) {
			fb := b.(*array.Float64Builder)
			for i := range rows {
				fb.Append(*field(&rows[i]))
			}
		},
		read: func(a arrow.Array, rows []T) error {
			arr, err := arrayAs[*array.Float64](a)
			for i := range rows {
				if err == nil {
					*field(&rows[i]) = arr.Value(i)
				}
			}
			return err
		},
	}
}

func u64Col[T any](name string, field func(*T) *uint64) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint64},
		append: func(b array.Builder, rows []T) {
			ub := b.(*array.Uint64Builder)
			for i := range rows {
				ub.Append(*field(&rows[i]))
			}
		},
		read: func(a arrow.Array, rows []T) error {
			arr, err := arrayAs[*array.Uint64](a)
			for i := range rows {
				if err == nil {
					*field(&rows[i]) = arr.Value(i)
				}
			}
			return err
		},
	}
}

func u32Col[T any](name string, field func(*T) *uint32) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint32},
		append: func(b array.Builder, rows []T) {
			ub := b.(*array.Uint32Builder)
			for i := range rows {
				ub.Append(*field(&rows[i]))
			}
		},
		read: func(a arrow.Array, rows []T) error {
			arr, err := arrayAs[*array.Uint32](a)
			for i := range rows {
				if err == nil {
					*field(&rows[i]) = arr.Value(i)
				}
			}
			return err
		},
	}
}

func boolCol[T any](name string, field func(*T) *bool) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.FixedWidthTypes.Boolean},
		append: func(b array.Builder, rows []T) {
			bb := b.(*array.BooleanBuilder)
			for i := range rows {
				bb.Append(*field(&rows[i]))
			}
		},
		read: func(a arrow.Array, rows []T) error {
			arr, err := arrayAs[*array.Boolean](a)
			for i := range rows {
				if err == nil {
					*field(&rows[i]) = arr.Value(i)
				}
			}
			return err
		},
	}
}

// timeCol stores Unix nanoseconds as timestamp[ns, tz=UTC], which other
// Arrow tools show as times rather than bare integers.
func timeCol[T any](name string, field func(*T) *int64) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.FixedWidthTypes.Timestamp_ns},
		append: func(b array.Builder, rows []T) {
			tb := b.(*array.TimestampBuilder)
			for i := range rows {
				tb.Append(arrow.Timestamp(*field(&rows[i])))
			}
		},
		read: func(a arrow.Array, rows []T) error {
			arr, err := arrayAs[*array.Timestamp](a)
			for i := range rows {
				if err == nil {
					*field(&rows[i]) = int64(arr.Value(i))
				}
			}
			return err
		},
	}
}

// strCol is a utf8 column. When nullable, the empty string is written as
// null (and null read back as ""), so that "no cluster" is SQL NULL.
// Values are copied out of the Arrow buffer: the rows outlive the record.
func strCol[T any](name string, nullable bool, field func(*T) *string) column[T] {
	return column[T]{
		field: arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: nullable},
		append: func(b array.Builder, rows []T) {
			sb := b.(*array.StringBuilder)
			for i := range rows {
				if v := *field(&rows[i]); v == "" && nullable {
					sb.AppendNull()
				} else {
					sb.Append(v)
				}
			}
		},
		read: func(a arrow.Array, rows []T) error {
			arr, err := arrayAs[*array.String](a)
			for i := range rows {
				if err == nil && arr.IsValid(i) {
					*field(&rows[i]) = strings.Clone(arr.Value(i))
				}
			}
			return err
		},
	}
}
