package backtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// Format names a trace format.
type Format string

// The trace formats ReadTrace understands.
const (
	FormatAuto     Format = "auto"     // detected from the first line
	FormatCSV      Format = "csv"      // ilb's CSV
	FormatMooncake Format = "mooncake" // Mooncake JSONL
	FormatAzure    Format = "azure"    // Azure LLM inference CSV
	FormatLMBench  Format = "lmbench"  // LMBenchmark per-request log CSV
)

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case FormatAuto, FormatCSV, FormatMooncake, FormatAzure, FormatLMBench:
		return f, nil
	}
	return "", fmt.Errorf("backtest: unknown trace format %q (want auto, csv, mooncake, azure or lmbench)", s)
}

// Request is one request of a trace.
type Request struct {
	// ArrivalNs is the arrival time in nanoseconds from the trace's first
	// request (ReadTrace shifts the first arrival to 0).
	ArrivalNs int64
	// Cluster is the front-end cluster the request came from; empty when
	// the trace has none (Prepare spreads such requests by demand share).
	Cluster string
	// Conversation is the affinity key; empty when the trace has none
	// (Prepare derives one from the leading prefix blocks).
	Conversation string
	InputTokens  int
	OutputTokens int
	// Blocks are the ids of the prompt's prefix blocks, in order, each
	// covering the fleet's block_tokens tokens; equal ids are equal
	// prefixes (Mooncake's hash_ids).
	Blocks []uint64
	// Model is the model the request names; empty when the trace has none
	// (AssignModels takes the fleet's default_model or the cluster's
	// model_shares).
	Model string
}

// Trace is a request trace in arrival order.
type Trace struct {
	Format   Format
	Requests []Request
	// Skipped counts the bad lines skipped under ReadOptions.SkipBad.
	Skipped int
	// FirstError is the first skipped line's error, for the message.
	FirstError error
}

// Limits on one trace line, so that a hostile file cannot make the reader
// allocate without bound or overflow the engine model.
const (
	MaxLineBytes     = 4 << 20
	MaxTokens        = 1 << 24 // per request, prompt or output
	MaxBlocksPerLine = MaxTokens
	maxTimeMs        = 4e12 // about 126 years: ns stay well within int64
)

// ErrBadTrace is wrapped by every error about the content of a trace.
var ErrBadTrace = errors.New("bad trace")

// LineError is a problem on one line of a trace file.
type LineError struct {
	Line int // 1-based
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns ErrBadTrace and the cause.
func (e *LineError) Unwrap() []error { return []error{ErrBadTrace, e.Err} }

// ReadOptions control ReadTrace.
type ReadOptions struct {
	Format Format // FormatAuto (or "") detects it
	// SkipBad skips (and counts) bad lines instead of failing on the first.
	SkipBad bool
}

// ReadTraceFile reads the trace at path.
func ReadTraceFile(path string, opt ReadOptions) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("backtest: read trace: %w", err)
	}
	defer f.Close()
	t, err := ReadTrace(f, opt)
	if err != nil {
		return nil, fmt.Errorf("backtest: read trace %s: %w", path, err)
	}
	return t, nil
}

// ReadTrace reads a trace in any supported format, validates every line,
// sorts the requests by arrival (stably: equal times keep file order) and
// shifts the first arrival to time 0. A bad line is an error naming the
// line, or with SkipBad is counted and skipped; ReadTrace never panics.
func ReadTrace(r io.Reader, opt ReadOptions) (*Trace, error) {
	br, err := decompress(bufio.NewReaderSize(r, 64<<10))
	if err != nil {
		return nil, err
	}
	format, err := detect(br, opt.Format)
	if err != nil {
		return nil, err
	}
	lr := &lineReader{br: br}
	var p lineParser
	switch format {
	case FormatCSV:
		p = &csvParser{}
	case FormatMooncake:
		p = &mooncakeParser{}
	case FormatAzure:
		p = &azureParser{}
	case FormatLMBench:
		p = &lmbenchParser{}
	}
	t := &Trace{Format: format}
	if err := readLines(lr, p, opt.SkipBad, t); err != nil {
		return nil, err
	}
	if len(t.Requests) == 0 {
		return nil, fmt.Errorf("%w: no requests", ErrBadTrace)
	}
	normalise(t)
	return t, nil
}

// decompress returns br, or a reader of its decompressed content when it
// starts with gzip's magic bytes (1f 8b): traces are often kept
// compressed, and so are the acceptance stretches in testdata.
func decompress(br *bufio.Reader) (*bufio.Reader, error) {
	magic, _ := br.Peek(2)
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrBadTrace, err)
	}
	return bufio.NewReaderSize(gzipErrors{zr}, 64<<10), nil
}

// gzipErrors marks a corrupt compressed stream as a bad trace.
type gzipErrors struct{ r io.Reader }

func (g gzipErrors) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: gzip: %v", ErrBadTrace, err)
	}
	return n, err
}

// lineParser turns the lines of one format into requests.
type lineParser interface {
	// parse handles one non-empty line; a nil request with a nil error
	// means the line was a header.
	parse(line []byte, lineNo int) (*Request, error)
}

func readLines(lr *lineReader, p lineParser, skipBad bool, t *Trace) error {
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var le *LineError
			if skipBad && errors.As(err, &le) {
				t.skip(err)
				continue
			}
			return err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		req, err := p.parse(line, lr.n)
		switch {
		case err != nil && skipBad:
			t.skip(&LineError{Line: lr.n, Err: err})
		case err != nil:
			return &LineError{Line: lr.n, Err: err}
		case req != nil:
			t.Requests = append(t.Requests, *req)
		}
	}
}

func (t *Trace) skip(err error) {
	if t.Skipped == 0 {
		t.FirstError = err
	}
	t.Skipped++
}

// normalise sorts by arrival and shifts the first arrival to 0.
func normalise(t *Trace) {
	slices.SortStableFunc(t.Requests, func(a, b Request) int {
		switch {
		case a.ArrivalNs < b.ArrivalNs:
			return -1
		case a.ArrivalNs > b.ArrivalNs:
			return 1
		}
		return 0
	})
	t0 := t.Requests[0].ArrivalNs
	for i := range t.Requests {
		t.Requests[i].ArrivalNs -= t0
	}
}

// lineReader reads lines of at most MaxLineBytes, counting them.
type lineReader struct {
	br  *bufio.Reader
	n   int
	buf []byte
}

func (lr *lineReader) next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.br.ReadSlice('\n')
		lr.buf = append(lr.buf, chunk...)
		if len(lr.buf) > MaxLineBytes {
			lr.n++
			if err := lr.skipRest(err); err != nil {
				return nil, err
			}
			return nil, &LineError{Line: lr.n, Err: fmt.Errorf("longer than %d bytes", MaxLineBytes)}
		}
		switch {
		case err == nil:
			lr.n++
			return lr.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(lr.buf) > 0:
			lr.n++
			return lr.buf, nil
		default:
			return nil, err
		}
	}
}

// skipRest discards the rest of an over-long line.
func (lr *lineReader) skipRest(err error) error {
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = lr.br.ReadSlice('\n')
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// detect peeks at the first non-blank bytes to find the format.
func detect(br *bufio.Reader, f Format) (Format, error) {
	if f != "" && f != FormatAuto {
		if _, err := ParseFormat(string(f)); err != nil {
			return "", err
		}
		return f, nil
	}
	head, err := br.Peek(4096)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("backtest: read trace: %w", err)
	}
	head = bytes.TrimLeft(head, " \t\r\n\ufeff")
	first, _, _ := bytes.Cut(head, []byte("\n"))
	lower := strings.ToLower(string(first))
	switch {
	case len(head) == 0:
		return "", fmt.Errorf("%w: empty file", ErrBadTrace)
	case head[0] == '{':
		return FormatMooncake, nil
	case strings.HasPrefix(lower, "timestamp_ms"):
		return FormatCSV, nil
	case strings.HasPrefix(lower, "timestamp,") && strings.Contains(lower, "contexttokens"):
		return FormatAzure, nil
	case isLMBenchHeader(lower):
		return FormatLMBench, nil
	}
	return "", fmt.Errorf("%w: cannot tell the format from the first line %q (want an ilb CSV header, an Azure CSV header, an LMBench log header or Mooncake JSON); use --format", ErrBadTrace, clip(string(first), 80))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// msToNs converts a time in milliseconds, checking it.
func msToNs(ms float64) (int64, error) {
	if math.IsNaN(ms) || ms < 0 || ms > maxTimeMs {
		return 0, fmt.Errorf("timestamp %v ms is not in [0, %g]", ms, float64(maxTimeMs))
	}
	return int64(math.Round(ms * 1e6)), nil
}

// checkTokens validates a request's token counts.
func checkTokens(input, output int64) error {
	if input < 0 || input > MaxTokens {
		return fmt.Errorf("input tokens %d not in [0, %d]", input, MaxTokens)
	}
	if output < 1 || output > MaxTokens {
		return fmt.Errorf("output tokens %d not in [1, %d]", output, MaxTokens)
	}
	return nil
}
