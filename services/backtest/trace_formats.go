package backtest

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// csvHeader is the header of ilb's trace CSV; the column names are a
// public contract (DESIGN.md). An optional seventh column, csvModel,
// names each request's model.
var csvHeader = []string{"timestamp_ms", "cluster", "conversation_id", "input_tokens", "output_tokens", "prefix_blocks"}

const csvModel = "model"

// csvParser reads ilb's CSV: the header, then one request per line.
// Fields may be quoted (RFC 4180) but not span lines.
type csvParser struct {
	header bool
	cols   int // fields per line: 6, or 7 with the model column
}

func (p *csvParser) parse(line []byte, _ int) (*Request, error) {
	fields, err := splitCSV(line)
	if err != nil {
		return nil, err
	}
	if !p.header {
		withModel := append(slices.Clone(csvHeader), csvModel)
		switch {
		case equalFold(fields, csvHeader):
		case equalFold(fields, withModel):
		default:
			return nil, fmt.Errorf("header is %q, want %q (optionally with a last column %q)",
				strings.Join(fields, ","), strings.Join(csvHeader, ","), csvModel)
		}
		p.header, p.cols = true, len(fields)
		return nil, nil
	}
	if len(fields) != p.cols {
		return nil, fmt.Errorf("%d fields, want %d as in the header", len(fields), p.cols)
	}
	r, err := csvRequest(fields)
	if err == nil && p.cols > len(csvHeader) {
		r.Model = strings.TrimSpace(fields[len(csvHeader)])
		if len(r.Model) > schemas.MaxNameLen {
			return nil, fmt.Errorf("model %q is longer than %d bytes", clip(r.Model, 40), schemas.MaxNameLen)
		}
	}
	return r, err
}

func csvRequest(f []string) (*Request, error) {
	ms, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return nil, fmt.Errorf("timestamp_ms %q is not a number", clip(f[0], 40))
	}
	r := &Request{Cluster: f[1], Conversation: f[2]}
	if r.ArrivalNs, err = msToNs(ms); err != nil {
		return nil, err
	}
	in, err1 := strconv.ParseInt(f[3], 10, 64)
	out, err2 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("input_tokens %q and output_tokens %q must be integers", clip(f[3], 40), clip(f[4], 40))
	}
	if err := checkTokens(in, out); err != nil {
		return nil, err
	}
	r.InputTokens, r.OutputTokens = int(in), int(out)
	if r.Blocks, err = parseBlocks(f[5]); err != nil {
		return nil, err
	}
	return r, nil
}

func parseBlocks(s string) ([]uint64, error) {
	words := strings.Fields(s)
	if len(words) > MaxBlocksPerLine {
		return nil, fmt.Errorf("%d prefix blocks, more than %d", len(words), MaxBlocksPerLine)
	}
	if len(words) == 0 {
		return nil, nil
	}
	out := make([]uint64, len(words))
	for i, w := range words {
		v, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("prefix block %q is not an unsigned integer", clip(w, 40))
		}
		out[i] = v
	}
	return out, nil
}

// splitCSV splits one CSV line; quoted fields go through encoding/csv.
func splitCSV(line []byte) ([]string, error) {
	if bytes.IndexByte(line, '"') < 0 {
		parts := strings.Split(string(line), ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts, nil
	}
	rd := csv.NewReader(bytes.NewReader(line))
	rd.FieldsPerRecord = -1
	rd.TrimLeadingSpace = true
	fields, err := rd.Read()
	if err != nil {
		return nil, fmt.Errorf("bad CSV: %v", err)
	}
	return fields, nil
}

func equalFold(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(strings.TrimSpace(a[i]), b[i]) {
			return false
		}
	}
	return true
}

// mooncakeLine is one line of a Mooncake trace. Unknown fields are ignored
// (later releases add some); the four below are required except hash_ids.
type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int64   `json:"input_length"`
	OutputLength *int64   `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// mooncakeParser reads Mooncake JSONL: timestamp in ms, input_length,
// output_length, hash_ids (512-token prefix blocks, chained: equal ids
// mean equal prefixes).
type mooncakeParser struct{}

func (mooncakeParser) parse(line []byte, _ int) (*Request, error) {
	var m mooncakeLine
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("bad JSON: %s", clip(err.Error(), 120))
	}
	if m.Timestamp == nil || m.InputLength == nil || m.OutputLength == nil {
		return nil, errors.New("timestamp, input_length and output_length are required")
	}
	if err := checkTokens(*m.InputLength, *m.OutputLength); err != nil {
		return nil, err
	}
	if len(m.HashIDs) > MaxBlocksPerLine {
		return nil, fmt.Errorf("%d hash_ids, more than %d", len(m.HashIDs), MaxBlocksPerLine)
	}
	ns, err := msToNs(*m.Timestamp)
	if err != nil {
		return nil, err
	}
	return &Request{ArrivalNs: ns, InputTokens: int(*m.InputLength), OutputTokens: int(*m.OutputLength), Blocks: m.HashIDs}, nil
}

// azureParser reads the Azure LLM inference trace (2023):
// TIMESTAMP,ContextTokens,GeneratedTokens, with wall-clock timestamps.
type azureParser struct{ header bool }

var azureHeader = []string{"timestamp", "contexttokens", "generatedtokens"}

// azureTimeLayout is the trace's timestamp, e.g. 2023-11-16 18:15:46.6805900.
const azureTimeLayout = "2006-01-02 15:04:05.999999999"

func (p *azureParser) parse(line []byte, _ int) (*Request, error) {
	fields, err := splitCSV(line)
	if err != nil {
		return nil, err
	}
	if !p.header {
		if !equalFold(fields, azureHeader) {
			return nil, fmt.Errorf("header is %q, want TIMESTAMP,ContextTokens,GeneratedTokens", strings.Join(fields, ","))
		}
		p.header = true
		return nil, nil
	}
	if len(fields) != 3 {
		return nil, fmt.Errorf("%d fields, want 3 (TIMESTAMP,ContextTokens,GeneratedTokens)", len(fields))
	}
	ts, err := time.Parse(azureTimeLayout, fields[0])
	if err != nil || ts.Year() < 1970 || ts.Year() > 2200 {
		return nil, fmt.Errorf("TIMESTAMP %q is not a time like 2023-11-16 18:15:46.6805900", clip(fields[0], 40))
	}
	in, err1 := strconv.ParseInt(fields[1], 10, 64)
	out, err2 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("ContextTokens %q and GeneratedTokens %q must be integers", clip(fields[1], 40), clip(fields[2], 40))
	}
	if err := checkTokens(in, out); err != nil {
		return nil, err
	}
	return &Request{ArrivalNs: ts.UnixNano(), InputTokens: int(in), OutputTokens: int(out)}, nil
}
