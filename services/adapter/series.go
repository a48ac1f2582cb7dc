package adapter

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// families wraps the parsed families with the series-selection rule the
// sums and means use.
type families map[string]*dto.MetricFamily

// Labels that tell copies of one engine core's numbers apart: every
// tensor- and pipeline-parallel rank (and its process) may report the
// same running, waiting and KV figures. SGLang reports from each
// attention-TP rank 0 by default (tp_rank = dp_rank × attention TP size
// under DP attention) and from every rank with
// --enable-metrics-for-all-schedulers.
var copyLabels = []string{"tp_rank", "pp_rank", "pid"}

// Labels whose values are distinct engine cores of one engine: vLLM
// V1's data-parallel engines and SGLang's data-parallel ranks.
var rankLabels = []string{"engine", "dp_rank"}

// series is one kept series of a family: its metric and the key that
// identifies it from one scrape to the next.
type series struct {
	key string
	m   *dto.Metric
}

// series returns the series of the first present name (and that name),
// one per distinct
// label set once copyLabels are ignored; of several copies it keeps the
// lowest (pp_rank, tp_rank), the one SGLang always reports from. The
// keys are sorted, so sums do not depend on exposition order.
func (f families) series(names ...string) (string, []series) {
	for _, n := range names {
		mf := f[n]
		if mf == nil || len(mf.GetMetric()) == 0 {
			continue
		}
		byKey := map[string]*dto.Metric{}
		for _, m := range mf.GetMetric() {
			k := seriesKey(m)
			if old, ok := byKey[k]; !ok || rankOrder(m, old) < 0 {
				byKey[k] = m
			}
		}
		out := make([]series, 0, len(byKey))
		for k, m := range byKey {
			out = append(out, series{key: k, m: m})
		}
		slices.SortFunc(out, func(a, b series) int { return cmp.Compare(a.key, b.key) })
		return n, out
	}
	return "", nil
}

// seriesKey is a metric's labels without copyLabels, as name=value pairs
// in the exposition's (sorted) order.
func seriesKey(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		if slices.Contains(copyLabels, l.GetName()) {
			continue
		}
		b.WriteString(l.GetName())
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l.GetValue()))
		b.WriteByte(',')
	}
	return b.String()
}

// rankOrder orders copies by (pp_rank, tp_rank), numerically.
func rankOrder(a, b *dto.Metric) int {
	if c := cmp.Compare(rankNumber(a, "pp_rank"), rankNumber(b, "pp_rank")); c != 0 {
		return c
	}
	return cmp.Compare(rankNumber(a, "tp_rank"), rankNumber(b, "tp_rank"))
}

func rankNumber(m *dto.Metric, name string) int {
	n, err := strconv.Atoi(label(m, name, "0"))
	if err != nil {
		return 0
	}
	return n
}

func label(m *dto.Metric, name, def string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return def
}

// cores counts the distinct engine cores (values of rankLabels) over the
// series of the given quantities (each a list of alternative names); 1
// when none is labelled.
func (f families) cores(quantities ...[]string) int {
	seen := map[string]bool{}
	for _, names := range quantities {
		_, ss := f.series(names...)
		for _, s := range ss {
			var id []string
			for _, l := range rankLabels {
				id = append(id, label(s.m, l, ""))
			}
			if v := strings.Join(id, "/"); v != strings.Repeat("/", len(rankLabels)-1) {
				seen[v] = true
			}
		}
	}
	return max(len(seen), 1)
}

// incarnation names the life of the process that wrote a series: the
// counter's creation time (the NAME_created gauge vLLM's
// prometheus_client writes) and the pid label (SGLang's DP ranks). A
// series whose incarnation changed between two scrapes was reset, even
// if its value did not go down.
func (f families) incarnation(family string, s series) string {
	created := strings.TrimSuffix(family, "_total") + "_created"
	var inc string
	if mf := f[created]; mf != nil {
		for _, m := range mf.GetMetric() {
			if seriesKey(m) == s.key {
				inc = strconv.FormatFloat(m.GetGauge().GetValue()+m.GetUntyped().GetValue(), 'g', -1, 64)
				break
			}
		}
	}
	return inc + "/" + label(s.m, "pid", "")
}
