package admit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/oxios/oxios/pkg/proto"
)

// The host's load, for the queue's overload signal and the resources
// record: read from /proc when asked, never in a loop of its own.

// ReadHost reads the load average, memory and memory pressure.
func ReadHost() proto.Host {
	h := proto.Host{Cores: runtime.NumCPU(), MemPressure: -1}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			h.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			name, rest, _ := strings.Cut(sc.Text(), ":")
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				continue
			}
			kb, _ := strconv.ParseInt(fs[0], 10, 64)
			switch name {
			case "MemTotal":
				h.MemTotal = kb << 10
			case "MemAvailable":
				h.MemAvailable = kb << 10
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/pressure/memory"); err == nil {
		h.MemPressure = psiSome10(b)
	}
	return h
}

// psiSome10 is "avg10" of the "some" line of a PSI file (-1 if absent).
func psiSome10(b []byte) float64 {
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 2 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "avg10="); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err == nil {
					return x
				}
			}
		}
	}
	return -1
}

// Judge says why h is overloaded by the thresholds load (per core) and
// memory (percent; 0: none) ("" if it is not). Without PSI, memory
// pressure is taken as the share of memory that is not available.
func Judge(h *proto.Host, load, memory float64) string {
	var why []string
	if t := load; t > 0 && h.Cores > 0 {
		if per := h.Load1 / float64(h.Cores); per > t {
			why = append(why, fmt.Sprintf("load %.2f per core > %.2f", per, t))
		}
	}
	if t := memory; t > 0 {
		p := h.MemPressure
		name := "memory pressure"
		if p < 0 && h.MemTotal > 0 {
			p, name = 100*(1-float64(h.MemAvailable)/float64(h.MemTotal)), "memory in use"
		}
		if p > t {
			why = append(why, fmt.Sprintf("%s %.1f%% > %.1f%%", name, p, t))
		}
	}
	return strings.Join(why, "; ")
}

// Overload returns the overload signal of a queue: why the host is
// overloaded now by the thresholds ("" if it is not; with no threshold
// nothing is read).
func Overload(load, memory float64) func() string {
	return func() string {
		if load <= 0 && memory <= 0 {
			return ""
		}
		h := ReadHost()
		return Judge(&h, load, memory)
	}
}
