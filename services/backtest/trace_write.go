package backtest

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// WriteCSV writes t as ilb's trace CSV: the header, then one line per
// request with its timestamp in milliseconds (fractions kept), cluster,
// conversation id, token counts and space-separated prefix block ids, and
// a model column when some request names its model. Reading the output
// back gives the same requests.
func WriteCSV(w io.Writer, t *Trace) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := csv.NewWriter(bw)
	header := csvHeader
	if slices.ContainsFunc(t.Requests, func(r Request) bool { return r.Model != "" }) {
		header = append(slices.Clone(csvHeader), csvModel)
	}
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("backtest: write csv: %w", err)
	}
	rec := make([]string, len(header))
	var sb strings.Builder
	for i := range t.Requests {
		r := &t.Requests[i]
		sb.Reset()
		for j, b := range r.Blocks {
			if j > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(strconv.FormatUint(b, 10))
		}
		rec[0] = formatMs(r.ArrivalNs)
		rec[1], rec[2] = r.Cluster, r.Conversation
		rec[3], rec[4] = strconv.Itoa(r.InputTokens), strconv.Itoa(r.OutputTokens)
		rec[5] = sb.String()
		if len(rec) > len(csvHeader) {
			rec[len(csvHeader)] = r.Model
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("backtest: write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("backtest: write csv: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("backtest: write csv: %w", err)
	}
	return nil
}

// formatMs writes ns as an exact decimal number of milliseconds.
func formatMs(ns int64) string {
	ms, frac := ns/1e6, ns%1e6
	if frac == 0 {
		return strconv.FormatInt(ms, 10)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%06d", ms, frac), "0")
}
