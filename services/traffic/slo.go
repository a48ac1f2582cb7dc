package traffic

import (
	"fmt"
	"time"

	"github.com/ilb-router/ilb/schemas"
)

// SLO is the service-level objective a request is judged by: the fleet
// file's ttft_slo_ms and tbot_slo_ms. An answered request is good (it
// counts towards goodput) when its time to first token is at most TTFT
// and its mean time between output tokens at most TBOT, as the
// backtester judges slo_attainment (services/backtest, SLO.Met).
type SLO struct {
	TTFT time.Duration
	TBOT time.Duration
}

// SLOOf returns the fleet's SLO (its defaults when the file gives none).
func SLOOf(f *schemas.Fleet) SLO {
	ttft, tbot := f.TTFTSLOMs, f.TBOTSLOMs
	if !(ttft > 0) {
		ttft = schemas.DefaultTTFTSLOMs
	}
	if !(tbot > 0) {
		tbot = schemas.DefaultTBOTSLOMs
	}
	return SLO{TTFT: msDuration(ttft), TBOT: msDuration(tbot)}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func (s SLO) validate() error {
	if s.TTFT <= 0 || s.TBOT <= 0 {
		return fmt.Errorf("SLO: TTFT %v and TBOT %v must be positive", s.TTFT, s.TBOT)
	}
	return nil
}

// met reports whether an answered request r was served within s. Only a
// streamed answer has a measured TTFT and TBOT; an answer that was not
// streamed is not judged good (the client saw no first token).
func (s SLO) met(r *result) bool {
	return r.streamed && r.ttft <= s.TTFT && r.tbot <= s.TBOT
}

// meanTBOT is the mean time between output tokens of an answer whose
// first token came at first and last at last: (last − first)/(tokens − 1);
// 0 for an answer of one token (there is no gap to judge).
func meanTBOT(first, last time.Time, tokens int) time.Duration {
	if tokens < 2 || !last.After(first) {
		return 0
	}
	return last.Sub(first) / time.Duration(tokens-1)
}
