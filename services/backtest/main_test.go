package backtest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running (Run's
// simulations must all have ended when it returns).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
