//go:build !race

package schemas

const raceEnabled = false
