// Package wasm runs untrusted tools in a WebAssembly sandbox (issue 7).
//
// A tool is a WASI preview 1 module NAME.wasm in a tools folder, with a
// manifest NAME.json beside it. A call gets its input on stdin and its
// args, sees only the folders it is given (the run's workspace at /work),
// has no network (wazero's WASI has sockets only when a host adds them,
// and this one adds none), and is bounded in memory, wall-clock time and
// output. Compiled modules are kept per path, size and mtime, so only the
// first call of a tool pays for the compile; with a cache folder
// (NewCached), only the first call on this machine.
package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// Defaults of a call that names no limit.
const (
	DefaultMemory  = 64 << 20
	DefaultTimeout = 10 * time.Second
	DefaultCap     = 1 << 20
	// GuestWork is where a call sees its first folder (the workspace).
	GuestWork = "/work"
	pageSize  = 64 << 10
	maxPages  = 1 << 16
)

// Status of a call that did not exit by itself.
const (
	// StatusTimeout is a call ended by its wall-clock limit, as a shell
	// reports a SIGKILLed process.
	StatusTimeout = 137
	// StatusTrap is a call that trapped (unreachable, out of bounds, out
	// of memory where the guest traps rather than exits).
	StatusTrap = 134
)

// ErrNoTool is a tool that is not in the tools folder.
var ErrNoTool = errors.New("no such tool")

// Manifest describes a tool to its callers: the model reads Description
// and InputSchema.
type Manifest struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Mount is a host folder a call sees at Guest.
type Mount struct {
	Host     string
	Guest    string
	ReadOnly bool
	// Owner, when not 0, is given what the tool creates there: the uid
	// of the run whose workspace it is, so that the run can read and
	// change what its tool wrote.
	Owner uint32
}

// Spec is one call.
type Spec struct {
	Tool  string
	Args  []string // after argv[0], which is the tool's name
	Stdin []byte
	// Mounts are all the call sees of the host; none means no files.
	Mounts  []Mount
	Env     []string // KEY=VALUE
	Memory  int64    // bytes; 0 = DefaultMemory
	Timeout time.Duration
	Cap     int // bytes kept of each of stdout and stderr; 0 = DefaultCap
}

// Result is what came of a call.
type Result struct {
	Status    int
	Stdout    []byte
	Stderr    []byte
	Truncated bool
	TimedOut  bool
	// Trap is why the module trapped, "" if it exited.
	Trap     string
	Duration time.Duration // the call, compile included
	// Compile is the time this call spent compiling the module: 0 when
	// it was cached.
	Compile time.Duration
	// Refused are the paths the guest was refused out of a mount, through
	// a symlink or a race (at most a few).
	Refused []string
}

// Runner runs the tools of one folder. It is safe for concurrent use.
type Runner struct {
	dir   string
	cache wazero.CompilationCache

	mu       sync.Mutex
	runtimes map[uint32]*runtime // by memory limit in pages
	closed   bool
	calls    sync.WaitGroup // Close waits for them
}

// runtime is a wazero runtime for one memory limit and what it compiled.
type runtime struct {
	rt      wazero.Runtime
	mu      sync.Mutex
	modules map[string]*module
}

type module struct {
	size    int64
	mtime   time.Time
	ready   chan struct{}
	err     error
	cm      wazero.CompiledModule
	compile time.Duration
}

// New returns a Runner for the tools in dir, which keeps what it
// compiles in memory.
func New(dir string) *Runner { return NewCached(dir, "") }

// NewCached returns a Runner for the tools in dir that keeps what it
// compiles in the folder cache too (see CheckCache), so that the next
// runner on the same folder, in this process or another, loads a tool
// instead of compiling it again; "" keeps it in memory only.
func NewCached(dir, cache string) *Runner {
	return &Runner{dir: dir, cache: openCache(cache), runtimes: map[uint32]*runtime{}}
}

// Dir is the tools folder.
func (r *Runner) Dir() string { return r.dir }

// Lazy is a Runner made on first use: a daemon whose agents run no tools
// compiles nothing. The zero Lazy has none yet.
type Lazy struct {
	once sync.Once
	r    *Runner
}

// Runner is the runner of the tools in dir with its compilation cache
// in the folder cache (NewCached), made at the first call (the
// arguments of later calls are not looked at).
func (l *Lazy) Runner(dir, cache string) *Runner {
	l.once.Do(func() { l.r = NewCached(dir, cache) })
	return l.r
}

// Close ends the runner's runtimes and compiled modules, if it was made;
// none is made after.
func (l *Lazy) Close(ctx context.Context) {
	l.once.Do(func() {})
	if l.r != nil {
		l.r.Close(ctx)
	}
}

// ValidName reports whether name can name a tool: letters, digits, '-'
// and '_', so it never leaves the tools folder.
func ValidName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// List returns the manifests of the tools that have a module, by name.
func (r *Runner) List() ([]Manifest, error) {
	names, err := filepath.Glob(filepath.Join(r.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Manifest
	for _, f := range names {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if !ValidName(name) {
			continue
		}
		if _, err := os.Stat(filepath.Join(r.dir, name+".wasm")); err != nil {
			continue
		}
		m, err := r.Manifest(name)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Manifest reads the manifest of tool name.
func (r *Runner) Manifest(name string) (Manifest, error) {
	if !ValidName(name) {
		return Manifest{}, fmt.Errorf("tool %q: %w", name, ErrNoTool)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return Manifest{}, fmt.Errorf("tool %s: %w", name, ErrNoTool)
	}
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("tool %s: manifest: %v", name, err)
	}
	if m.Name != name {
		return Manifest{}, fmt.Errorf("tool %s: manifest names %q", name, m.Name)
	}
	if len(m.InputSchema) == 0 || m.InputSchema[0] != '{' {
		return Manifest{}, fmt.Errorf("tool %s: manifest: input_schema is not a JSON object", name)
	}
	return m, nil
}

// Run calls a tool. The error is for a call that could not start (no such
// tool, a module that does not compile); what the tool did, trapping and
// timing out included, is in the Result.
func (r *Runner) Run(ctx context.Context, s Spec) (Result, error) {
	start := time.Now()
	if !ValidName(s.Tool) {
		return Result{}, fmt.Errorf("tool %q: %w", s.Tool, ErrNoTool)
	}
	mem := s.Memory
	if mem <= 0 {
		mem = DefaultMemory
	}
	pages := uint64(mem) / pageSize
	if pages < 1 {
		pages = 1
	}
	if pages > maxPages {
		pages = maxPages
	}
	rt, err := r.runtime(ctx, uint32(pages))
	if err != nil {
		return Result{}, err
	}
	defer r.calls.Done()
	m, err := rt.compiled(ctx, filepath.Join(r.dir, s.Tool+".wasm"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Result{}, fmt.Errorf("tool %s: %w", s.Tool, ErrNoTool)
		}
		return Result{}, fmt.Errorf("tool %s: %v", s.Tool, err)
	}
	res := Result{Compile: m.fresh}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	capBytes := s.Cap
	if capBytes <= 0 {
		capBytes = DefaultCap
	}
	stdout, stderr := &capWriter{max: capBytes}, &capWriter{max: capBytes}
	ref := &refusals{}
	fsc := wazero.NewFSConfig()
	for _, mt := range s.Mounts {
		rfs, err := newRootFS(mt.Host)
		if err != nil {
			return Result{}, fmt.Errorf("tool %s: mount %s: %v", s.Tool, mt.Guest, err)
		}
		rfs.guest, rfs.ref, rfs.owner = mt.Guest, ref, int(mt.Owner)
		defer rfs.Close()
		var mfs experimentalsys.FS = rfs
		if mt.ReadOnly {
			mfs = &sysfs.ReadFS{FS: rfs}
		}
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(mfs, mt.Guest)
	}
	mc := wazero.NewModuleConfig().
		WithName(""). // anonymous: calls of one tool run side by side
		WithArgs(append([]string{s.Tool}, s.Args...)...).
		WithStdin(bytes.NewReader(s.Stdin)).
		WithStdout(stdout).
		WithStderr(stderr).
		WithFSConfig(fsc).
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(rand.Reader)
	for _, kv := range s.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			mc = mc.WithEnv(k, v)
		}
	}
	cctx, cancel := context.WithTimeout(experimental.WithMemoryAllocator(ctx, mmapAllocator), timeout)
	mod, err := rt.rt.InstantiateModule(cctx, m.cm, mc)
	cancel()
	if mod != nil {
		_ = mod.Close(context.Background())
	}
	var exit *sys.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			res.Status, res.TimedOut = StatusTimeout, true
		case sys.ExitCodeContextCanceled:
			res.Status = StatusTimeout
			res.TimedOut = ctx.Err() == nil
		default:
			res.Status = int(exit.ExitCode())
		}
	default:
		res.Status, res.Trap = StatusTrap, trapReason(err)
	}
	res.Stdout, res.Stderr = stdout.buf.Bytes(), stderr.buf.Bytes()
	res.Truncated = stdout.cut || stderr.cut
	res.Duration = time.Since(start)
	res.Refused = ref.list()
	return res, nil
}

// trapReason is the first line of a trap, without the wasm stack trace.
func trapReason(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// Close waits for the calls under way, then ends every runtime and what
// it compiled.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.calls.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, rt := range r.runtimes {
		errs = append(errs, rt.rt.Close(ctx))
	}
	r.runtimes = map[uint32]*runtime{}
	errs = append(errs, r.cache.Close(ctx))
	return errors.Join(errs...)
}

// runtime returns the runtime whose memory limit is pages, counting a
// call under way (the caller's r.calls.Done ends it). Runtimes share one
// compilation cache, so a second limit does not compile again.
func (r *Runner) runtime(ctx context.Context, pages uint32) (*runtime, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("wasm: runner closed")
	}
	if rt := r.runtimes[pages]; rt != nil {
		r.calls.Add(1)
		return rt, nil
	}
	cfg := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(pages).
		WithCloseOnContextDone(true).
		WithCompilationCache(r.cache)
	w := wazero.NewRuntimeWithConfig(ctx, cfg)
	// WASI preview 1 and nothing else: no sockets, no host functions of ours.
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, w); err != nil {
		_ = w.Close(ctx)
		return nil, err
	}
	rt := &runtime{rt: w, modules: map[string]*module{}}
	r.runtimes[pages] = rt
	r.calls.Add(1)
	return rt, nil
}

// compiledModule is a compiled module, and the compile time when this
// call compiled it.
type compiledModule struct {
	cm    wazero.CompiledModule
	fresh time.Duration
}

// compiled returns path compiled, from the cache when path has the size
// and mtime it had then. Concurrent first calls compile once.
func (rt *runtime) compiled(ctx context.Context, path string) (compiledModule, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return compiledModule{}, err
	}
	rt.mu.Lock()
	m := rt.modules[path]
	if m != nil && m.size == fi.Size() && m.mtime.Equal(fi.ModTime()) {
		rt.mu.Unlock()
		<-m.ready
		if m.err != nil {
			return compiledModule{}, m.err
		}
		return compiledModule{cm: m.cm}, nil
	}
	m = &module{size: fi.Size(), mtime: fi.ModTime(), ready: make(chan struct{})}
	// A module replaced by a rebuild is not closed: a call may still be
	// instantiating it. The runtime's Close releases it.
	rt.modules[path] = m
	rt.mu.Unlock()
	start := time.Now()
	bin, err := os.ReadFile(path)
	if err == nil {
		m.cm, err = rt.rt.CompileModule(ctx, coalesceData(bin))
	}
	m.compile = time.Since(start)
	m.err = err
	close(m.ready)
	if err != nil {
		rt.mu.Lock()
		if rt.modules[path] == m {
			delete(rt.modules, path)
		}
		rt.mu.Unlock()
		return compiledModule{}, err
	}
	return compiledModule{cm: m.cm, fresh: m.compile}, nil
}

// capWriter keeps the first max bytes written to it and drops the rest.
type capWriter struct {
	buf bytes.Buffer
	max int
	cut bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	n := len(p)
	if room := w.max - w.buf.Len(); room < len(p) {
		if room < 0 {
			room = 0
		}
		p, w.cut = p[:room], true
	}
	w.buf.Write(p)
	return n, nil
}
