package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tools is a tools folder holding testdata/hostile as "hostile", built
// once for the package's tests; runner runs them.
var (
	tools    string
	cacheDir string // the compiled tools of the tests' runners
	runner   *Runner
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "oxios-wasm-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "hostile.wasm"), "./testdata/hostile")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building testdata/hostile: %v\n%s", err, out)
		return 1
	}
	manifest := `{"name":"hostile","description":"misbehaves on demand","input_schema":{"type":"object"}}`
	if err := os.WriteFile(filepath.Join(dir, "hostile.json"), []byte(manifest), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tools, cacheDir = dir, filepath.Join(dir, "cache")
	// The runners of the tests share a cache folder: hostile compiles
	// once (12 s under -race).
	runner = NewCached(dir, cacheDir)
	defer runner.Close(context.Background())
	return m.Run()
}

func run(t *testing.T, s Spec) Result {
	t.Helper()
	s.Tool = "hostile"
	if s.Timeout == 0 {
		s.Timeout = time.Minute // the first call compiles, slowly under -race
	}
	res, err := runner.Run(context.Background(), s)
	if err != nil {
		t.Fatalf("Run(%v): %v", s.Args, err)
	}
	return res
}

func TestStdinStdout(t *testing.T) {
	in := []byte("hello\nwasm\n")
	res := run(t, Spec{Args: []string{"echo"}, Stdin: in})
	if res.Status != 0 || !bytes.Equal(res.Stdout, in) || res.Trap != "" || res.TimedOut {
		t.Fatalf("echo: %+v", res)
	}
}

func TestExitStatus(t *testing.T) {
	for _, n := range []int{0, 1, 3, 42} {
		res := run(t, Spec{Args: []string{"exit", fmt.Sprint(n)}})
		if res.Status != n {
			t.Errorf("exit %d: status %d (%+v)", n, res.Status, res)
		}
	}
}

func TestReadOutsidePreopens(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts := []Mount{{Host: ws, Guest: GuestWork}}
	res := run(t, Spec{Args: []string{"read", "/work/in.txt"}, Mounts: mounts})
	if res.Status != 0 || string(res.Stdout) != "inside" {
		t.Fatalf("read /work/in.txt: %+v", res)
	}
	for _, p := range []string{"/etc/passwd", "/work/../../../../etc/passwd", "/work/../in.txt", ws + "/in.txt"} {
		res := run(t, Spec{Args: []string{"read", p}, Mounts: mounts})
		if res.Status == 0 || len(res.Stdout) > 0 {
			t.Errorf("read %s: %+v", p, res)
		}
	}
	// A symlink in the workspace does not lead out of it.
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if res := run(t, Spec{Args: []string{"read", "/work/link"}, Mounts: mounts}); res.Status == 0 {
		t.Errorf("read through a symlink out of the workspace: %+v", res)
	}
	// One inside it does, and so does a link up and out of it.
	if err := os.Symlink("in.txt", filepath.Join(ws, "rel")); err != nil {
		t.Fatal(err)
	}
	if res := run(t, Spec{Args: []string{"read", "/work/rel"}, Mounts: mounts}); res.Status != 0 || string(res.Stdout) != "inside" {
		t.Errorf("read through a symlink inside the workspace: %+v", res)
	}
	if err := os.Symlink("../../../../../../etc/passwd", filepath.Join(ws, "up")); err != nil {
		t.Fatal(err)
	}
	if res := run(t, Spec{Args: []string{"read", "/work/up"}, Mounts: mounts}); res.Status == 0 {
		t.Errorf("read through a relative symlink out of the workspace: %+v", res)
	}
	// No mounts: no files at all.
	if res := run(t, Spec{Args: []string{"read", "/work/in.txt"}}); res.Status == 0 {
		t.Errorf("read without mounts: %+v", res)
	}
	// Read-only mounts refuse writes; writable ones take them.
	if res := run(t, Spec{Args: []string{"write", "/work/out"}, Mounts: []Mount{{Host: ws, Guest: GuestWork, ReadOnly: true}}}); res.Status == 0 {
		t.Errorf("write to a read-only mount: %+v", res)
	}
	if res := run(t, Spec{Args: []string{"write", "/work/out"}, Mounts: mounts}); res.Status != 0 {
		t.Errorf("write to the workspace: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out")); string(b) != "hostile" {
		t.Errorf("workspace out = %q", b)
	}
}

func TestNoNetwork(t *testing.T) {
	res := run(t, Spec{Args: []string{"dial", "127.0.0.1:22"}})
	if res.Status == 0 || strings.Contains(string(res.Stdout), "connected") {
		t.Fatalf("dial: %+v", res)
	}
}

func TestTimeout(t *testing.T) {
	run(t, Spec{Args: []string{"exit", "0"}}) // compile outside the limit
	start := time.Now()
	res := run(t, Spec{Args: []string{"loop"}, Timeout: 300 * time.Millisecond})
	if !res.TimedOut || res.Status != StatusTimeout {
		t.Fatalf("loop: %+v", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("loop ended after %s, limit 300ms", d)
	}
}

func TestMemoryCap(t *testing.T) {
	res := run(t, Spec{Args: []string{"alloc", "8"}, Memory: 64 << 20})
	if res.Status != 0 {
		t.Fatalf("alloc 8MiB under 64MiB: %+v stderr %s", res, res.Stderr)
	}
	res = run(t, Spec{Args: []string{"alloc", "256"}, Memory: 64 << 20})
	if res.Status == 0 || strings.Contains(string(res.Stdout), "allocated") {
		t.Fatalf("alloc 256MiB under 64MiB: %+v", res)
	}
}

func TestOutputCap(t *testing.T) {
	res := run(t, Spec{Args: []string{"spew", "100000"}, Cap: 1000})
	if res.Status != 0 || len(res.Stdout) != 1000 || !res.Truncated {
		t.Fatalf("spew: status %d, %d bytes, truncated %v", res.Status, len(res.Stdout), res.Truncated)
	}
}

func TestCompileCached(t *testing.T) {
	r := NewCached(tools, cacheDir)
	defer r.Close(context.Background())
	s := Spec{Tool: "hostile", Args: []string{"exit", "0"}, Timeout: time.Minute}
	first, err := r.Run(context.Background(), s)
	if err != nil || first.Compile == 0 {
		t.Fatalf("first call: %+v %v", first, err)
	}
	second, err := r.Run(context.Background(), s)
	if err != nil || second.Compile != 0 {
		t.Fatalf("second call: %+v %v", second, err)
	}
	t.Logf("first call %s (compile %s), second %s", first.Duration, first.Compile, second.Duration)
}

func TestNoTool(t *testing.T) {
	for _, name := range []string{"nope", "../hostile", "", "a/b"} {
		if _, err := runner.Run(context.Background(), Spec{Tool: name}); !errors.Is(err, ErrNoTool) {
			t.Errorf("Run(%q): %v", name, err)
		}
	}
}

func TestList(t *testing.T) {
	ms, err := runner.List()
	if err != nil || len(ms) != 1 || ms[0].Name != "hostile" || string(ms[0].InputSchema) != `{"type":"object"}` {
		t.Fatalf("List: %+v %v", ms, err)
	}
}

// BenchmarkRunCached is a call of a compiled tool: instantiation, the Go
// runtime's start in the guest, and the call.
func BenchmarkRunCached(b *testing.B) {
	s := Spec{Tool: "hostile", Args: []string{"echo"}, Stdin: []byte(`{"a":1}`), Mounts: []Mount{{Host: b.TempDir(), Guest: GuestWork}}}
	if _, err := runner.Run(context.Background(), s); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := runner.Run(context.Background(), s); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCoalesceData(t *testing.T) {
	bin, err := os.ReadFile(filepath.Join(tools, "hostile.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	count := func(b []byte) uint64 {
		for i := 8; i < len(b); {
			n, j, _ := uleb(b, i+1)
			if b[i] == 11 {
				c, _, _ := uleb(b, j)
				return c
			}
			i = j + int(n)
		}
		return 0
	}
	out := coalesceData(bin)
	before, after := count(bin), count(out)
	if after == 0 || after >= before {
		t.Fatalf("data segments: %d before, %d after", before, after)
	}
	t.Logf("data segments: %d before, %d after; %d bytes before, %d after", before, after, len(bin), len(out))
	if string(coalesceData([]byte("not wasm"))) != "not wasm" {
		t.Fatal("coalesceData changed what is not a module")
	}
	for _, v := range []int64{0, 1, 63, 64, 127, 128, 1 << 20, 1<<31 - 1, -1, -64, -65} {
		got, _, err := sleb32(appendSleb(nil, v), 0)
		if err != nil || int64(got) != v {
			t.Errorf("sleb %d: %d %v", v, got, err)
		}
	}
}

func TestLazy(t *testing.T) {
	var l Lazy
	l.Close(context.Background()) // none made: nothing to close
	if r := l.Runner(tools, ""); r != nil {
		t.Fatal("a runner made after Close")
	}
	var m Lazy
	r := m.Runner(tools, "")
	if r == nil || r.Dir() != tools || m.Runner(t.TempDir(), "") != r {
		t.Fatal("one runner, of the first dir")
	}
	m.Close(context.Background())
}
