package window

import "testing"

// TestFeaturesClasses: with a classifier, completions of one cluster and
// engine go to one row per request class (sorted by cluster, then
// class), the engine row still counts them all, and completions without a
// cluster stay in the engine row only.
func TestFeaturesClasses(t *testing.T) {
	c := featureConfig()
	c.Classify = func(_, model string, prompt uint32) string {
		if model == "" {
			return ""
		}
		if prompt > 8192 {
			return model + "/8192-inf"
		}
		return model + "/0-8192"
	}
	f, err := NewFeatures(c)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range []struct {
		cluster, model string
		prompt         uint32
	}{
		{"fe", "big", 100}, {"fe", "big", 9000}, {"fe", "small", 10}, {"fe", "big", 200}, {"", "big", 100}, {"fe", "", 5},
	} {
		e := completion("e1", ev.cluster, 1+float64(i)*0.1, 100, 10, 5, ev.prompt, 0, "")
		e.Completion.Model = ev.model
		if got := f.Add(Untracked, &e); got != Applied {
			t.Fatalf("event %d: %v", i, got)
		}
	}
	rows := f.Flush(nil)
	type key struct{ cluster, class string }
	got := map[key]uint64{}
	var order []key
	for _, r := range rows {
		got[key{r.Cluster, r.Class}] = r.Requests
		order = append(order, key{r.Cluster, r.Class})
	}
	want := map[key]uint64{{"", ""}: 6, {"fe", ""}: 1, {"fe", "big/0-8192"}: 2, {"fe", "big/8192-inf"}: 1, {"fe", "small/0-8192"}: 1}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("row %v: %d requests, want %d", k, got[k], n)
		}
	}
	wantOrder := []key{{"", ""}, {"fe", ""}, {"fe", "big/0-8192"}, {"fe", "big/8192-inf"}, {"fe", "small/0-8192"}}
	for i := range wantOrder {
		if order[i] != wantOrder[i] {
			t.Fatalf("row order %v, want %v", order, wantOrder)
		}
	}
}
