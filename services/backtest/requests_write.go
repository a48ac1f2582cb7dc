package backtest

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// RequestsHeader is the header of the per-request records (`--requests`),
// a public contract.
var RequestsHeader = []string{"policy", "request", "arrival_ms", "cluster", "conversation", "engine", "outcome",
	"ttft_ms", "e2e_ms", "tbot_ms", "input_tokens", "cached_tokens", "output_tokens", "model"}

// RequestsFile is a `--requests` output: CSV, gzip-compressed CSV when
// the name ends in .gz, Parquet when it ends in .parquet. It is created
// before the run, so that a path that cannot be written fails at once.
type RequestsFile struct {
	path string
	f    *os.File
}

// CreateRequests creates the file at path (truncating it).
func CreateRequests(path string) (*RequestsFile, error) {
	if path == "" {
		return nil, fmt.Errorf("backtest: --requests: empty path")
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("backtest: --requests: %w", err)
	}
	return &RequestsFile{path: path, f: f}, nil
}

// Abort closes and removes the file, for a run that failed.
func (rf *RequestsFile) Abort() {
	rf.f.Close()
	os.Remove(rf.path)
}

// Write writes one row per request and policy of res, policies in the
// order of res, requests in arrival order, and closes the file. Latencies
// are written in the shortest form that reads back as the same float64,
// so the aggregates of res can be recomputed from the rows exactly.
func (rf *RequestsFile) Write(b *Backtest, res *Result) error {
	var err error
	switch {
	case strings.HasSuffix(rf.path, ".parquet"):
		err = writeRequestsParquet(rf.f, b, res)
	case strings.HasSuffix(rf.path, ".gz"):
		zw := gzip.NewWriter(rf.f)
		err = writeRequestsCSV(zw, b, res)
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
	default:
		err = writeRequestsCSV(rf.f, b, res)
	}
	if cerr := rf.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(rf.path)
		return fmt.Errorf("backtest: --requests %s: %w", rf.path, err)
	}
	return nil
}

// requestRow is one record; the optional fields are nil-able by ok flags.
type requestRow struct {
	policy, cluster, conversation, engine, outcome string
	model                                          string
	request                                        int
	arrivalMs                                      float64
	served                                         bool // latencies and cached tokens are set
	ttft, e2e, tbot                                float64
	input, cached, output                          int64
}

// eachRow calls fn for every record of res.
func eachRow(b *Backtest, res *Result, fn func(*requestRow) error) error {
	w, fi := b.w, b.fi
	var row requestRow
	for pi := range res.Policies {
		p := &res.Policies[pi]
		o := p.outcomes
		if o == nil {
			return fmt.Errorf("policy %s has no per-request outcomes", p.Policy)
		}
		for i := range w.len() {
			row = requestRow{policy: p.Policy, request: i, arrivalMs: arrivalMs(w, i),
				cluster: fi.clusters[w.cluster[i]], conversation: w.convKey[w.conv[i]],
				outcome: outcomeNames[o.kind[i]], input: int64(w.prompt[i]), output: int64(w.output[i]),
				model: w.models[w.model[i]]}
			if e := o.engine[i]; e >= 0 {
				row.engine = fi.engines[e]
			}
			if o.kind[i] == outServed {
				row.served = true
				row.ttft, row.e2e, row.tbot, row.cached = o.ttft[i], o.e2e[i], o.tbot[i], int64(o.cached[i])
			}
			if err := fn(&row); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeRequestsCSV(out io.Writer, b *Backtest, res *Result) error {
	bw := bufio.NewWriterSize(out, 1<<16)
	cw := csv.NewWriter(bw)
	if err := cw.Write(RequestsHeader); err != nil {
		return err
	}
	rec := make([]string, len(RequestsHeader))
	err := eachRow(b, res, func(r *requestRow) error {
		rec[0], rec[1], rec[2] = r.policy, strconv.Itoa(r.request), formatFloat(r.arrivalMs)
		rec[3], rec[4], rec[5], rec[6] = r.cluster, r.conversation, r.engine, r.outcome
		rec[7], rec[8], rec[9], rec[11] = "", "", "", ""
		if r.served {
			rec[7], rec[8], rec[9] = formatFloat(r.ttft), formatFloat(r.e2e), formatFloat(r.tbot)
			rec[11] = strconv.FormatInt(r.cached, 10)
		}
		rec[10], rec[12] = strconv.FormatInt(r.input, 10), strconv.FormatInt(r.output, 10)
		rec[13] = r.model
		return cw.Write(rec)
	})
	if err != nil {
		return err
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// formatFloat writes v in the shortest decimal form that parses back to v.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
