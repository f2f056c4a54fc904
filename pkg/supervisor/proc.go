package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stat is what /proc/PID/stat tells of a process.
type stat struct {
	state byte
	ppid  int
	pgid  int
	cpu   float64 // seconds, user+system, its own and its reaped children's
	rss   int64   // bytes
}

var (
	clkTck   = 100.0 // USER_HZ: 100 on every Linux ABI Go supports
	pageSize = int64(os.Getpagesize())
)

// readStat parses /proc/PID/stat (proc(5)). The command name may hold
// spaces and parentheses, so fields are counted from its last ')'.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return stat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	num := func(n int) int64 {
		v, _ := strconv.ParseInt(f[n-3], 10, 64)
		return v
	}
	return stat{
		state: f[0][0],
		ppid:  int(num(4)),
		pgid:  int(num(5)),
		cpu:   float64(num(14)+num(15)+num(16)+num(17)) / clkTck,
		rss:   num(24) * pageSize,
	}, nil
}

// SignalName is a signal's name without "SIG" ("TERM").
func SignalName(sig syscall.Signal) string {
	n := unix.SignalName(sig)
	if n == "" {
		return strconv.Itoa(int(sig))
	}
	return strings.TrimPrefix(n, "SIG")
}

// ParseSignal reads a signal given by name ("TERM", "SIGTERM", "term") or
// number.
func ParseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return syscall.SIGTERM, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("signal %d is out of range", n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(name)
	if sig == 0 {
		return 0, fmt.Errorf("unknown signal %q", s)
	}
	return sig, nil
}
