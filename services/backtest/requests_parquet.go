package backtest

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// RequestsSchema is the Arrow schema of the Parquet per-request records:
// the CSV's columns, with nulls where the CSV has empty fields.
var RequestsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "policy", Type: arrow.BinaryTypes.String},
	{Name: "request", Type: arrow.PrimitiveTypes.Int64},
	{Name: "arrival_ms", Type: arrow.PrimitiveTypes.Float64},
	{Name: "cluster", Type: arrow.BinaryTypes.String},
	{Name: "conversation", Type: arrow.BinaryTypes.String},
	{Name: "engine", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "outcome", Type: arrow.BinaryTypes.String},
	{Name: "ttft_ms", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "e2e_ms", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "tbot_ms", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "input_tokens", Type: arrow.PrimitiveTypes.Int64},
	{Name: "cached_tokens", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "output_tokens", Type: arrow.PrimitiveTypes.Int64},
	{Name: "model", Type: arrow.BinaryTypes.String},
}, nil)

// parquetBatchRows is the number of rows per record batch (and row group).
const parquetBatchRows = 1 << 16

func writeRequestsParquet(out io.Writer, b *Backtest, res *Result) error {
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithDictionaryDefault(true), parquet.WithMaxRowGroupLength(parquetBatchRows))
	// The writer closes an io.Closer it is given; the caller closes out.
	fw, err := pqarrow.NewFileWriter(RequestsSchema, struct{ io.Writer }{out}, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, RequestsSchema)
	defer rb.Release()
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		rec := rb.NewRecordBatch()
		defer rec.Release()
		n = 0
		return fw.Write(rec)
	}
	err = eachRow(b, res, func(r *requestRow) error {
		appendParquetRow(rb, r)
		if n++; n == parquetBatchRows {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if cerr := fw.Close(); err == nil {
		err = cerr
	}
	return err
}

func appendParquetRow(rb *array.RecordBuilder, r *requestRow) {
	str := func(i int, v string) { rb.Field(i).(*array.StringBuilder).Append(v) }
	i64 := func(i int, v int64) { rb.Field(i).(*array.Int64Builder).Append(v) }
	f64 := func(i int, v float64) { rb.Field(i).(*array.Float64Builder).Append(v) }
	str(0, r.policy)
	i64(1, int64(r.request))
	f64(2, r.arrivalMs)
	str(3, r.cluster)
	str(4, r.conversation)
	if r.engine == "" {
		rb.Field(5).AppendNull()
	} else {
		str(5, r.engine)
	}
	str(6, r.outcome)
	if r.served {
		f64(7, r.ttft)
		f64(8, r.e2e)
		f64(9, r.tbot)
	} else {
		rb.Field(7).AppendNull()
		rb.Field(8).AppendNull()
		rb.Field(9).AppendNull()
	}
	i64(10, r.input)
	if r.served {
		i64(11, r.cached)
	} else {
		rb.Field(11).AppendNull()
	}
	i64(12, r.output)
	str(13, r.model)
}
