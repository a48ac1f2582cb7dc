package ilb_test

import (
	"testing"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
)

// schemas imports nothing of ours, so limits it shares with solver/sched
// are kept equal by hand; this test keeps them so.
func TestTableLimitsAgree(t *testing.T) {
	if schemas.MaxTableSlots != sched.MaxSlots {
		t.Fatalf("schemas.MaxTableSlots %d != sched.MaxSlots %d", schemas.MaxTableSlots, sched.MaxSlots)
	}
	if schemas.TableEncodingRLEUvarintV1 != sched.EncodingRLE {
		t.Fatalf("table encoding names differ: %q vs %q", schemas.TableEncodingRLEUvarintV1, sched.EncodingRLE)
	}
}
