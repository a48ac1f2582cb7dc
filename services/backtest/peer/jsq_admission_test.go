package peer

import "testing"

func newTestJSQ(t *testing.T, n int) (*jsqAdmission, *testView) {
	t.Helper()
	r, err := jsqAdmissionPolicy().New(testFleet(n, 64, 500_000, 9000), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*jsqAdmission), newTestView(n)
}

// With headroom nothing is refused: least in flight per slot wins, even
// for a prompt that cannot meet the SLO anywhere (its own prefill is not
// held against it).
func TestJSQAdmissionNeverShedsWithHeadroom(t *testing.T) {
	j, v := newTestJSQ(t, 3)
	v.flight = []int{5, 2, 9}
	if got := j.Pick(v, &Request{PromptTokens: 200_000}); got != 1 {
		t.Fatalf("picked %d, want 1 (fewest in flight)", got)
	}
}

// An engine whose queued prefill would start the request after the SLO
// is out; JSQ runs over the others; with none left the request is shed.
func TestJSQAdmissionStartTime(t *testing.T) {
	j, v := newTestJSQ(t, 2)
	v.flight = []int{0, 10}
	// 17991 tokens at 9000/s: 1999 ms + 1 ms network = 2000: in time.
	v.backlog[0] = 17991
	if got := j.Pick(v, &Request{}); got != 0 {
		t.Fatalf("start at exactly the SLO: picked %d, want 0", got)
	}
	v.backlog[0] = 18000 // 2001 ms
	if got := j.Pick(v, &Request{}); got != 1 {
		t.Fatalf("engine 0 late: picked %d, want 1", got)
	}
	v.backlog[1] = 18000
	if got := j.Pick(v, &Request{}); got != Shed {
		t.Fatalf("late everywhere: %d, want Shed", got)
	}
	v.down[0], v.down[1] = true, true
	if got := j.Pick(v, &Request{}); got != NoEngine {
		t.Fatalf("no engine: %d, want NoEngine", got)
	}
}

// Equal loads go to the nearer engine, then round-robin.
func TestJSQAdmissionTies(t *testing.T) {
	j, v := newTestJSQ(t, 3)
	j.f.Clusters[0].NetworkMs = []float64{5, 1, 1}
	got := []int{j.Pick(v, &Request{}), j.Pick(v, &Request{}), j.Pick(v, &Request{})}
	if got[0] == 0 || got[1] == 0 || got[0] == got[1] || got[2] != got[0] {
		t.Fatalf("picks %v, want engines 1 and 2 alternating, never the farther 0", got)
	}
}
