package regress

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRegenerateLLMDTestdata rebuilds testdata/llmd_runs.csv and
// testdata/llmd_windows.csv from the llm-d per-request logs. It runs only
// when ILB_LLMD_DATA names the llmd_lmbench_h100 folder, e.g.
//
//	ILB_LLMD_DATA=../../../shared/data/llmd_lmbench_h100 go test -run Regenerate ./solver/regress/
//
// Windows are 10 s of finish time aligned to the Unix epoch, as the
// aggregator's default windows are; a window counts only if the run covers
// it whole (first launch to last finish). Latencies per window are the
// lower median, rank floor(0.5*(n-1)), as the aggregator's sketch reads it.
func TestRegenerateLLMDTestdata(t *testing.T) {
	dir := os.Getenv("ILB_LLMD_DATA")
	if dir == "" {
		t.Skip("ILB_LLMD_DATA not set")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*", "LMBench_*.csv"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no LMBench_*.csv under %s: %v", dir, err)
	}
	slices.Sort(files)
	runs := [][]string{{"stack", "scenario", "qps", "requests", "duration_s", "served_rps", "ttft_p50_ms", "ttft_mean_ms", "tpot_p50_ms", "prompt_tokens_mean"}}
	wins := [][]string{{"stack", "scenario", "qps", "window_start_s", "completions", "served_rps", "ttft_p50_ms", "tpot_p50_ms"}}
	for _, f := range files {
		reqs, err := readRequests(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		stack, scenario, qps := runName(f)
		runs = append(runs, runRow(stack, scenario, qps, reqs))
		wins = append(wins, windowRows(stack, scenario, qps, reqs, 10)...)
	}
	writeCSV(t, "testdata/llmd_runs.csv", runs)
	writeCSV(t, "testdata/llmd_windows.csv", wins)
}

type request struct {
	prompt, ttftMs, tpotMs, launch, finish float64
}

func readRequests(path string) ([]request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	var out []request
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		v := func(name string) float64 { x, _ := strconv.ParseFloat(rec[col[name]], 64); return x }
		q := request{prompt: v("prompt_tokens"), ttftMs: 1000 * v("ttft"), launch: v("launch_time"), finish: v("finish_time"), tpotMs: math.NaN()}
		if g := v("generation_tokens"); g >= 2 {
			q.tpotMs = 1000 * v("generation_time") / (g - 1)
		}
		out = append(out, q)
	}
}

var runFile = regexp.MustCompile(`LMBench_(short_input|sharegpt)_(?:qps|output_)([0-9.]+)\.csv$`)

func runName(path string) (stack, scenario, qps string) {
	m := runFile.FindStringSubmatch(path)
	return filepath.Base(filepath.Dir(path)), m[1], m[2]
}

func runRow(stack, scenario, qps string, reqs []request) []string {
	start, end := span(reqs)
	var ttft, tpot []float64
	prompt := 0.0
	for _, q := range reqs {
		ttft = append(ttft, q.ttftMs)
		if !math.IsNaN(q.tpotMs) {
			tpot = append(tpot, q.tpotMs)
		}
		prompt += q.prompt
	}
	n := float64(len(reqs))
	return []string{stack, scenario, qps, strconv.Itoa(len(reqs)), f3(end - start), f3(n / (end - start)),
		f3(lowerMedian(ttft)), f3(mean(ttft)), f3(lowerMedian(tpot)), f3(prompt / n)}
}

func windowRows(stack, scenario, qps string, reqs []request, size float64) [][]string {
	start, end := span(reqs)
	by := map[float64][]request{}
	for _, q := range reqs {
		w := math.Floor(q.finish/size) * size
		by[w] = append(by[w], q)
	}
	var keys []float64
	for w := range by {
		if w >= start && w+size <= end {
			keys = append(keys, w)
		}
	}
	slices.Sort(keys)
	var rows [][]string
	for _, w := range keys {
		var ttft, tpot []float64
		for _, q := range by[w] {
			ttft = append(ttft, q.ttftMs)
			if !math.IsNaN(q.tpotMs) {
				tpot = append(tpot, q.tpotMs)
			}
		}
		rows = append(rows, []string{stack, scenario, qps, strconv.FormatFloat(w, 'f', 0, 64), strconv.Itoa(len(by[w])),
			f3(float64(len(by[w])) / size), f3(lowerMedian(ttft)), f3(lowerMedian(tpot))})
	}
	return rows
}

func span(reqs []request) (start, end float64) {
	start, end = math.Inf(1), math.Inf(-1)
	for _, q := range reqs {
		start, end = min(start, q.launch), max(end, q.finish)
	}
	return start, end
}

func lowerMedian(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func writeCSV(t *testing.T, path string, rows [][]string) {
	var b strings.Builder
	w := csv.NewWriter(&b)
	if err := w.WriteAll(rows); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("wrote %s: %d rows, %d bytes\n", path, len(rows)-1, b.Len())
}
