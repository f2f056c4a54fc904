// Package mountinfo reads /proc/self/mountinfo: where the mount, the
// supervisor's cgroups and ox-status look for what is mounted where.
package mountinfo

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of mountinfo.
type Mount struct {
	Point  string // where it is mounted, unescaped
	FSType string // "fuse.oxios", "cgroup2"...
	Super  string // the super block options ("rw,pids")
}

// Read returns the process's mounts, in mountinfo's order (a later mount
// at a point hides an earlier one).
func Read() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := Parse(sc.Text()); ok {
			ms = append(ms, m)
		}
	}
	return ms, sc.Err()
}

// At returns the visible mount at dir (the last there), if any.
func At(dir string) (Mount, bool, error) {
	ms, err := Read()
	var at Mount
	found := false
	for _, m := range ms {
		if m.Point == dir {
			at, found = m, true
		}
	}
	return at, found, err
}

// Parse takes a mountinfo line apart:
// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER
func Parse(line string) (Mount, bool) {
	f := strings.Fields(line)
	for i := 6; i < len(f); i++ {
		if f[i] == "-" && len(f) >= i+4 {
			return Mount{Point: unescape(f[4]), FSType: f[i+1], Super: f[i+3]}, true
		}
	}
	return Mount{}, false
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
