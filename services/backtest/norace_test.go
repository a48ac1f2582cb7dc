//go:build !race

package backtest

const raceEnabled = false
