//go:build race

package client

// raceEnabled: the race detector is on, and sync.Pool drops items at
// random, so allocation counts mean nothing.
const raceEnabled = true
