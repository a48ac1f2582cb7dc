package arrowipc

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// maxNesting bounds how deep validation follows child arrays; Arrow's own
// writer refuses deeper nesting.
const maxNesting = 64

// validateRecord checks that every column of rec can be read without
// going out of bounds. arrow-go's IPC reader builds arrays from the
// message as given; a corrupt message can declare more values than its
// buffers hold, which would panic at first access.
func validateRecord(rec arrow.RecordBatch) error {
	if rec.NumRows() < 0 || rec.NumCols() != int64(rec.Schema().NumFields()) {
		return fmt.Errorf("batch declares %d rows and %d columns for %d fields", rec.NumRows(), rec.NumCols(), rec.Schema().NumFields())
	}
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			return fmt.Errorf("column %d has %d rows, batch has %d", i, col.Len(), rec.NumRows())
		}
		if err := validateArray(col, 0); err != nil {
			return fmt.Errorf("column %d (%s): %w", i, rec.ColumnName(i), err)
		}
	}
	return nil
}

func validateArray(arr arrow.Array, depth int) error {
	if err := validateData(arr.Data(), depth); err != nil {
		return err
	}
	if d, ok := arr.(*array.Dictionary); ok {
		if err := validateArray(d.Dictionary(), depth+1); err != nil {
			return fmt.Errorf("dictionary: %w", err)
		}
		return validateIndices(d)
	}
	// Offsets of strings, binaries and lists, lengths of struct children.
	if v, ok := arr.(interface{ ValidateFull() error }); ok {
		return v.ValidateFull()
	}
	return nil
}

// validateData checks the sizes of a layout's validity and fixed-width
// value buffers, recursively through child arrays.
func validateData(d arrow.ArrayData, depth int) error {
	if depth > maxNesting {
		return errors.New("nested too deeply")
	}
	if d.Offset() < 0 || d.Len() < 0 {
		return fmt.Errorf("negative offset %d or length %d", d.Offset(), d.Len())
	}
	end := int64(d.Offset()) + int64(d.Len())
	bufs := d.Buffers()
	if len(bufs) > 0 && bufs[0] != nil && int64(bufs[0].Len()) < bitutil.BytesForBits(end) {
		return fmt.Errorf("validity bitmap holds %d bytes, %d values need %d", bufs[0].Len(), end, bitutil.BytesForBits(end))
	}
	if fw, ok := d.DataType().(arrow.FixedWidthDataType); ok && fw.ID() != arrow.NULL && end > 0 {
		need := bitutil.BytesForBits(end * int64(fw.BitWidth()))
		if len(bufs) < 2 || bufs[1] == nil || int64(bufs[1].Len()) < need {
			return fmt.Errorf("%s values need %d bytes, buffer is shorter", fw, need)
		}
	}
	for i, c := range d.Children() {
		if err := validateData(c, depth+1); err != nil {
			return fmt.Errorf("child %d: %w", i, err)
		}
	}
	return nil
}

// validateIndices checks that every non-null index of a dictionary array
// points into its dictionary.
func validateIndices(d *array.Dictionary) error {
	n := d.Dictionary().Len()
	for i := range d.Len() {
		if d.IsNull(i) {
			continue
		}
		if j := d.GetValueIndex(i); j < 0 || j >= n {
			return fmt.Errorf("index %d at row %d outside a dictionary of %d", j, i, n)
		}
	}
	return nil
}
