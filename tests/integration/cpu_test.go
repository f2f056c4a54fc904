package integration

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// With OXIOS_TEST_CPU=FILE, the tests write to FILE the CPU time (user
// and system) of the daemons and commands each top-level test started
// through startDaemon and run, their sandboxed runs included, most costly
// first: what a test costs make test, which on a loaded machine its
// elapsed time does not say.
//
//	OXIOS_TEST_CPU=/tmp/cpu.txt go test -race -count=1 -timeout 20m ./tests/integration
var cpu struct {
	mu     sync.Mutex
	byTest map[string]time.Duration
	starts map[string]int
}

func countCPU(t *testing.T, ps *os.ProcessState) {
	if ps == nil || os.Getenv("OXIOS_TEST_CPU") == "" {
		return
	}
	name, _, _ := strings.Cut(t.Name(), "/")
	cpu.mu.Lock()
	defer cpu.mu.Unlock()
	if cpu.byTest == nil {
		cpu.byTest, cpu.starts = map[string]time.Duration{}, map[string]int{}
	}
	cpu.byTest[name] += ps.UserTime() + ps.SystemTime()
	cpu.starts[name]++
}

func writeCPUReport() {
	path := os.Getenv("OXIOS_TEST_CPU")
	if path == "" {
		return
	}
	cpu.mu.Lock()
	defer cpu.mu.Unlock()
	names := make([]string, 0, len(cpu.byTest))
	var total time.Duration
	for n, d := range cpu.byTest {
		names = append(names, n)
		total += d
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(cpu.byTest[b], cpu.byTest[a]) })
	var b strings.Builder
	fmt.Fprintf(&b, "%8.1f s  total of %d tests\n", total.Seconds(), len(names))
	for _, n := range names {
		fmt.Fprintf(&b, "%8.1f s  %5d processes  %s\n", cpu.byTest[n].Seconds(), cpu.starts[n], n)
	}
	os.WriteFile(path, []byte(b.String()), 0o644)
}
