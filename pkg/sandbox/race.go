//go:build race

package sandbox

import "os"

// A race-built program sleeps a second as it exits (the race runtime's
// atexit_sleep_ms) unless its GORACE says otherwise. go test -race builds
// oxiosd, the shim and the tools that way, and the tests set GORACE for
// what they start; a race-built oxiosd hands it on to what it starts
// itself, or every sandboxed run, and every tool called inside one, took
// a second longer (the red team's attacks of messages and approvals: 163 s
// instead of 10).
func init() {
	if g, ok := os.LookupEnv("GORACE"); ok {
		RaceEnv = []string{"GORACE=" + g}
	}
}
