package integration

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// fsx: the operation mix of xfstests' ltp/fsx.c (reads, writes, truncates,
// mapped reads and writes, close and reopen) on one file of the mount,
// checked after every operation against a copy kept in memory. Reopens
// drop the kernel's caches now and then (as root), so the file's inode is
// evicted between a close and the next open: the case that lost writes
// (issue 25). make test runs a short mix; OXIOS_FSX_OPS (make torture)
// sets a longer one.

type fsx struct {
	t       *testing.T
	path    string
	rng     *rand.Rand
	fd      int
	shadow  []byte
	maxLen  int
	mapOK   bool // the kernel maps files opened for writing
	drop    bool // may drop caches
	op      int
	history []string
}

func (x *fsx) failf(format string, args ...any) {
	x.t.Helper()
	n := len(x.history)
	from := max(0, n-12)
	x.t.Fatalf("op %d: %s\nlast operations:\n%s", x.op, fmt.Sprintf(format, args...), joinLines(x.history[from:]))
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for _, l := range s {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func (x *fsx) log(format string, args ...any) {
	x.history = append(x.history, fmt.Sprintf("%d: ", x.op)+fmt.Sprintf(format, args...))
}

func (x *fsx) open() {
	fd, err := syscall.Open(x.path, syscall.O_RDWR|syscall.O_CREAT, 0o644)
	if err != nil {
		x.failf("open: %v", err)
	}
	x.fd = fd
}

func (x *fsx) checkSize(what string) {
	var st syscall.Stat_t
	if err := syscall.Fstat(x.fd, &st); err != nil {
		x.failf("fstat after %s: %v", what, err)
	}
	if st.Size != int64(len(x.shadow)) {
		x.failf("size after %s: %d, want %d", what, st.Size, len(x.shadow))
	}
}

func (x *fsx) compare(what string, off int, got []byte) {
	want := x.shadow[off : off+len(got)]
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		x.failf("%s at %d+%d: byte %d is %#x, want %#x", what, off, len(got), off+i, got[i], want[i])
	}
}

func (x *fsx) step() {
	x.op++
	size := len(x.shadow)
	switch r := x.rng.Intn(100); {
	case r < 25: // read
		if size == 0 {
			return
		}
		off := x.rng.Intn(size)
		n := 1 + x.rng.Intn(min(size-off, 16<<10))
		x.log("read %d+%d", off, n)
		buf := make([]byte, n)
		got, err := syscall.Pread(x.fd, buf, int64(off))
		if err != nil || got != n {
			x.failf("pread %d+%d: %d %v", off, n, got, err)
		}
		x.compare("read", off, buf)
	case r < 55: // write
		off := x.rng.Intn(x.maxLen - 1)
		n := 1 + x.rng.Intn(min(x.maxLen-off, 16<<10))
		x.log("write %d+%d (size %d)", off, n, size)
		buf := make([]byte, n)
		x.rng.Read(buf)
		if got, err := syscall.Pwrite(x.fd, buf, int64(off)); err != nil || got != n {
			x.failf("pwrite %d+%d: %d %v", off, n, got, err)
		}
		if off+n > size {
			x.shadow = append(x.shadow, make([]byte, off+n-size)...)
		}
		copy(x.shadow[off:], buf)
		x.checkSize("write")
	case r < 65: // truncate
		n := x.rng.Intn(x.maxLen)
		x.log("truncate %d -> %d", size, n)
		if err := syscall.Ftruncate(x.fd, int64(n)); err != nil {
			x.failf("ftruncate %d: %v", n, err)
		}
		if n > size {
			x.shadow = append(x.shadow, make([]byte, n-size)...)
		}
		x.shadow = x.shadow[:n]
		x.checkSize("truncate")
	case r < 75 && x.mapOK: // mapped read
		if size == 0 {
			return
		}
		off := x.rng.Intn(size)
		n := 1 + x.rng.Intn(min(size-off, 16<<10))
		pg := off &^ 4095
		x.log("mapread %d+%d", off, n)
		m, err := syscall.Mmap(x.fd, int64(pg), off-pg+n, syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			x.failf("mmap read %d+%d: %v", off, n, err)
		}
		got := bytes.Clone(m[off-pg:])
		syscall.Munmap(m)
		x.compare("mapread", off, got)
	case r < 85 && x.mapOK: // mapped write, growing the file first if needed
		off := x.rng.Intn(x.maxLen - 1)
		n := 1 + x.rng.Intn(min(x.maxLen-off, 16<<10))
		x.log("mapwrite %d+%d (size %d)", off, n, size)
		if off+n > size {
			if err := syscall.Ftruncate(x.fd, int64(off+n)); err != nil {
				x.failf("ftruncate before mapwrite: %v", err)
			}
			x.shadow = append(x.shadow, make([]byte, off+n-size)...)
		}
		pg := off &^ 4095
		m, err := syscall.Mmap(x.fd, int64(pg), off-pg+n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			x.failf("mmap write %d+%d: %v", off, n, err)
		}
		buf := make([]byte, n)
		x.rng.Read(buf)
		copy(m[off-pg:], buf)
		copy(x.shadow[off:], buf)
		if _, _, e := syscall.Syscall(syscall.SYS_MSYNC, uintptr(unsafePointer(m)), uintptr(len(m)), syscall.MS_SYNC); e != 0 {
			x.failf("msync: %v", e)
		}
		syscall.Munmap(m)
		x.checkSize("mapwrite")
	default: // close and reopen, sometimes with the inode evicted between
		drop := x.drop && x.rng.Intn(4) == 0
		x.log("close/open (drop caches %v)", drop)
		if err := syscall.Close(x.fd); err != nil {
			x.failf("close: %v", err)
		}
		if drop {
			os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0)
		}
		x.open()
		x.checkSize("reopen")
	}
}

func runFsx(t *testing.T, m *mounted, agent string, seed int64, ops int) {
	t.Helper()
	p := filepath.Join(m.mnt, "agent", agent, "state", "fsx"+strconv.FormatInt(seed, 10))
	x := &fsx{t: t, path: p, rng: rand.New(rand.NewSource(seed)), maxLen: 64 << 10}
	if f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0); err == nil {
		f.Close()
		x.drop = true
	}
	x.open()
	// Can the kernel map a file opened for writing (Linux 6.6)?
	if m, err := syscall.Mmap(x.fd, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err == nil {
		syscall.Munmap(m)
		x.mapOK = true
	} else if err != syscall.ENODEV {
		t.Fatalf("mmap of an empty file opened for writing: %v", err)
	}
	for x.op < ops {
		x.step()
	}
	syscall.Fsync(x.fd)
	syscall.Close(x.fd)
	b, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(b, x.shadow) {
		t.Fatalf("seed %d: content after %d ops differs (%d bytes, want %d): %v", seed, ops, len(b), len(x.shadow), err)
	}
	v, ok := m.load(t, agent, filepath.Base(p))
	if !ok || v != string(x.shadow) {
		t.Fatalf("seed %d: ox-state load after %d ops differs (%d bytes, want %d)", seed, ops, len(v), len(x.shadow))
	}
}

// TestFUSEFsx runs the mix with several seeds; OXIOS_FSX_OPS=20000 (make
// torture) for the long run.
func TestFUSEFsx(t *testing.T) {
	t.Parallel()
	ops := 1000
	if s := os.Getenv("OXIOS_FSX_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("OXIOS_FSX_OPS=%q: %v", s, err)
		}
		ops = n
	}
	m := startMounted(t, daemonOpts{})
	m.ox("", "ox-state", "save", "-a", "fsx", "seed", "x")
	for _, seed := range []int64{1, 2, 3} {
		t.Run("seed"+strconv.FormatInt(seed, 10), func(t *testing.T) { runFsx(t, m, "fsx", seed, ops) })
	}
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
