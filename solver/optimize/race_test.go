//go:build race

package optimize

// raceEnabled lets slow tests do less work under the race detector.
const raceEnabled = true
