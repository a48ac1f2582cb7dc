//go:build race

package optimizer

// raceEnabled lets slow tests do less work under the race detector.
const raceEnabled = true
