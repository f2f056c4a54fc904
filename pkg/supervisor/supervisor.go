// Package supervisor runs the processes of agent runs, the way init runs
// a daemon's children: each run in its own process group, with its
// resource limits, its stdout and stderr captured as records, reaped when
// it exits (no zombies), and its records kept in a log that any number of
// clients may follow. It knows nothing of policy, audit or the socket:
// the kernel decides what to run and records what happened, through
// Spec and the OnExit hook.
//
// Nothing polls: each run has one goroutine waiting for it and one per
// output stream blocked in read(2), so idle runs cost oxiosd no CPU.
package supervisor

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

// Limits are the resource limits of a run's processes, applied with
// prlimit(2) to the leader right after it starts (its children inherit
// them). Zero means unlimited.
type Limits struct {
	// Memory is bytes of data (RLIMIT_DATA: heap and private writable
	// mappings, not the address space a JIT or a Go program reserves
	// and never touches) where no cgroup binds the run's memory.
	Memory    uint64
	CPU       uint64 // seconds of CPU time (RLIMIT_CPU)
	Processes uint64 // RLIMIT_NPROC (per uid: root is not bound by it)
	OpenFiles uint64 // RLIMIT_NOFILE
}

// Spec is what to run.
type Spec struct {
	ID      string
	Agent   string
	Argv    []string // Argv[0] is a path
	Env     []string
	Dir     string // the workspace: created, and removed at exit
	Stdin   []byte
	Limits  Limits
	Command []string // as the user gave it (for the record)
	Task    string
	Model   string
	// Records: the run's stdout lines that are JSON objects are its
	// records as they are (the LLM runner prints its message, tool_call...
	// records); other lines become output records.
	Records bool
	// OpenStdin keeps the run's stdin open after Stdin: WriteStdin
	// writes it until CloseStdin or the run's end (stdin.go).
	OpenStdin bool
	// Policy is the digest of the policy the run starts under, for its
	// record.
	Policy string
	// Home is the node that placed the run as its agent's home, which
	// its use is charged to when it ends; "" for a run of this node's.
	Home string
	// Wall ends the run (TERM, then KILL after Grace) once it has run
	// this long; 0 means no limit.
	Wall time.Duration
	// Sandbox, when set, is the run's sandbox: the supervisor fills in the
	// command, the uid it gives the run and the run's socket.
	Sandbox *sandbox.Spec
	// SocketAt is where the run's own socket appears inside its sandbox
	// (the path OXIOS_SOCKET names); "" for none.
	SocketAt string
	// Work is the host folder the run works on through an overlay
	// (Sandbox.Overlay), "" for none: Harvest reads its changes before
	// the workspace is removed.
	Work string
}

// Grace is how long a run has between TERM and KILL when it is ended.
const Grace = 5 * time.Second

// maxLine bounds one output record; a longer line is split. maxRecord
// bounds a record a runner prints.
const (
	maxLine   = 64 << 10
	maxRecord = 4 << 20
)

// Supervisor owns the runs.
type Supervisor struct {
	dir string // DATA/runs: <id>.jsonl, the records of each run
	log *slog.Logger
	// OnExit is called once per run, after its exit record is in its log
	// and before Done is closed.
	OnExit func(*Run)
	// Harvest is called once per run that worked on a host folder
	// (Spec.Work), after its exit record and before its workspace,
	// which holds the overlay's upper layer, is removed.
	Harvest func(*Run)
	// Keep is how many ended runs are kept (records and logs).
	Keep int
	// Cgroups, when the machine offers them, gives each run a control
	// group bounding its processes together (see Cgroups).
	Cgroups *Cgroups
	// Listen serves a run's own socket at path, connectable by uid only;
	// closing what it returns stops serving it. Set by the daemon (the
	// socket server); without it sandboxed runs have no socket.
	Listen func(path string, uid uint32) (io.Closer, error)
	// SocketDir is where the runs' own sockets are made (DATA/sockets
	// when ""). A socket bound into a sandbox shows in its mountinfo as
	// its path within its filesystem: beside oxiosd's socket, on the
	// runtime folder's tmpfs (/run, $XDG_RUNTIME_DIR), that path says
	// nothing of the data directory.
	SocketDir string

	mu     sync.RWMutex
	runs   map[string]*Run
	ended  []string     // ids of ended runs, oldest first
	byPID  map[int]*Run // live runs by leader pid (= their process group)
	who    map[int]*Run // RunOf's cache: pid -> run (nil: none); cleared on every start and exit
	uids   uids
	idmaps idmaps
	live   sync.WaitGroup
	closed bool
}

// New opens the runs directory. Runs that a previous oxiosd left running
// are marked lost: this process cannot wait for them.
func New(dir string, log *slog.Logger) (*Supervisor, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Supervisor{dir: dir, log: log, Keep: 1000, runs: map[string]*Run{}, byPID: map[int]*Run{}, who: map[int]*Run{}}
	s.uids.init()
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// Open is New with the daemon's [runs] settings: keep ended runs kept,
// and a cgroup for each run when cgroups is set (UseCgroups).
func Open(dir string, keep int, cgroups bool, log *slog.Logger) (*Supervisor, error) {
	s, err := New(dir, log)
	if err != nil {
		return nil, err
	}
	s.Keep = keep
	if cgroups {
		s.UseCgroups()
	}
	return s, nil
}

// wallEnded begins the error of a run its wall time budget ended.
const wallEnded = "wall time budget"

// WallEnded reports whether rec is the record of a run its wall time
// budget (Spec.Wall) ended.
func WallEnded(rec *proto.RunRecord) bool { return strings.HasPrefix(rec.Error, wallEnded) }

// Run is one run.
type Run struct {
	s    *Supervisor
	spec Spec

	mu   sync.Mutex
	rec  proto.RunRecord
	logf *os.File
	size int64 // bytes of records in logf
	// held, once the run ended and until OnExit has run (done): the
	// size of the log before its exit record, which a follower is told
	// only then, after what OnExit makes durable of the end.
	held          int64
	sum           hash.Hash     // blake3 of the log's bytes, as written
	changed       chan struct{} // closed (and replaced) when a record is added
	done          chan struct{} // closed once the exit record is in the log
	cmd           *exec.Cmd
	group         *Group    // its cgroup, or nil
	uid           uint32    // its sandbox's uid, or 0 when it runs unsandboxed
	sandboxLimits Limits    // the rlimits its sandbox's shim sets on itself
	status        *os.File  // read end of the sandbox's status pipe
	report        string    // the shim's report, read before its time (it failed to start the command)
	sock          io.Closer // its own socket
	// A rootless run whose workspace is a filesystem of its own mount
	// namespace (sandbox.Bind.Tmpfs): its shim serves its execs (execs),
	// and work is that workspace, open from /proc/PID/root.
	execs     *sandbox.Execs
	serveShim *os.File // the shim's end of execs' socket, until it started
	idmapNS   *os.File // the user namespace of its work, until the shim started (idmaps.go)
	work      *os.File
	wall      *time.Timer
	reason    string // why the supervisor ended it, for the exit record
	in        *stdin // its stdin, kept open (Spec.OpenStdin), or nil
	// Usage charged to this run by the kernel.
	Tokens int64
	Cost   float64
	Execs  int64
}

// ID returns the run's id.
func (r *Run) ID() string { return r.rec.ID }

// Digest returns the blake3 hash (hex) of the run's log as written so
// far: after the exit record, the digest of the whole conversation, which
// the kernel puts on the audit log.
func (r *Run) Digest() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sum == nil {
		return ""
	}
	return hex.EncodeToString(r.sum.Sum(nil))
}

// UID returns the uid of the run's sandbox, 0 when it is not sandboxed.
func (r *Run) UID() uint32 { return r.uid }

// Agent returns the run's agent.
func (r *Run) Agent() string { return r.rec.Agent }

// Spec returns what the run runs.
func (r *Run) Spec() Spec { return r.spec }

// Done is closed once the run has exited and its exit record is logged.
func (r *Run) Done() <-chan struct{} { return r.done }

// MakeWorkspace makes dir, the workspace of a run or an exec in the
// sandbox sb (nil: none): a filesystem of its own of sb.Disk bytes when
// oxiosd is root (sandbox.MountWorkspace), else a folder.
func MakeWorkspace(dir string, sb *sandbox.Spec) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if sb == nil || sb.UserNS || sb.Disk == 0 {
		return nil
	}
	if err := sandbox.MountWorkspace(dir, sb.Disk, 0); err != nil {
		os.Remove(dir)
		return err
	}
	return nil
}

// Start starts a run.
func (s *Supervisor) Start(spec Spec) (*Run, error) {
	if len(spec.Argv) == 0 {
		return nil, proto.Errorf(proto.EINVAL, "nothing to run")
	}
	if err := MakeWorkspace(spec.Dir, spec.Sandbox); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, spec.ID+".jsonl"), os.O_CREATE|os.O_EXCL|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		sandbox.RemoveWorkspace(spec.Dir)
		return nil, fmt.Errorf("run log: %w", err)
	}
	r := &Run{s: s, spec: spec, logf: logf, sum: blake3.New(32, nil), changed: make(chan struct{}), done: make(chan struct{})}
	r.rec = proto.RunRecord{
		Type: proto.RecordRun, ID: spec.ID, Agent: spec.Agent, State: proto.RunRunning,
		Command: spec.Command, Task: spec.Task, Model: spec.Model, Workspace: spec.Dir, Work: spec.Work, OpenStdin: spec.OpenStdin, Policy: spec.Policy, Home: spec.Home,
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	// Its own process group: signals reach the whole run, and the
	// terminal's Ctrl-C does not reach it behind the supervisor's back.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The group is made outside the lock, which the start itself holds (a
	// child's first request waits for its run to be known), and before
	// the sandbox's spec, which carries the rlimits beside it.
	s.Cgroups.hold()
	if s.Cgroups != nil {
		if r.group, err = s.Cgroups.New(spec.ID, spec.Limits); err != nil {
			s.log.Warn("run cgroup", "run", spec.ID, "err", err)
		}
	}
	var statusW *os.File
	if spec.Sandbox != nil {
		if statusW, err = r.sandboxed(cmd); err != nil {
			r.group.Remove()
			r.abandon()
			return nil, err
		}
		defer statusW.Close()
	}
	var inR *os.File // the read end of a stdin kept open
	if spec.OpenStdin {
		if inR, err = r.openStdin(); err != nil {
			r.group.Remove()
			r.abandon()
			return nil, err
		}
		defer inR.Close() // the process's now
		cmd.Stdin = inR
	} else if len(spec.Stdin) > 0 {
		cmd.Stdin = strings.NewReader(string(spec.Stdin))
	}
	// Pipes of our own (not cmd.StdoutPipe): Wait must not wait for a
	// grandchild that keeps them open.
	outR, outW, err := os.Pipe()
	if err != nil {
		r.group.Remove()
		r.abandon()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		r.group.Remove()
		outR.Close()
		outW.Close()
		r.abandon()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		r.group.Remove()
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		r.abandon()
		return nil, proto.Errorf(proto.ESHUTDOWN, "oxiosd is shutting down")
	}
	start := func(attr *syscall.SysProcAttr) error {
		cmd.SysProcAttr = attr
		return cmd.Start()
	}
	err = r.group.Start(start, cmd.SysProcAttr, spec.Limits)
	if errors.Is(err, errJoin) {
		// The group is no use: the rlimits still bind (a sandbox's are
		// those of the group's absence too: its spec is encoded; the
		// prlimit below sets the ones the group stood for).
		s.log.Warn("run cgroup", "run", spec.ID, "err", err)
		r.group.Remove()
		r.group = nil
		err = start(cmd.SysProcAttr)
	}
	outW.Close()
	errW.Close()
	if r.idmapNS != nil {
		r.idmapNS.Close() // the shim's now
		r.idmapNS = nil
	}
	if err != nil {
		s.mu.Unlock()
		outR.Close()
		errR.Close()
		r.group.Remove()
		r.abandon()
		return nil, proto.Errorf(proto.ENOENT, "%s: %v", spec.Argv[0], unwrapExec(err))
	}
	r.cmd = cmd
	r.rec.PID = cmd.Process.Pid
	r.rec.Started = time.Now().UTC()
	s.runs[spec.ID] = r
	s.byPID[r.rec.PID] = r
	clear(s.who)
	s.live.Add(1)
	s.mu.Unlock()
	if l := r.group.rlimits(spec.Limits); r.status == nil || l != r.sandboxLimits {
		// Unsandboxed, or a sandbox whose group was lost at the start:
		// set from here what the shim did not set itself.
		if err := SetLimits(r.rec.PID, l); err != nil {
			s.log.Warn("run limits", "run", spec.ID, "err", err)
		}
	}
	if r.status != nil {
		// The run is there once its command is: a signal sent to it
		// from now on reaches the command, not a shim still building.
		// (Not under s.mu: the shim's lookups in the mount need it.)
		statusW.Close()
		ok, report := sandbox.WaitStarted(r.status)
		if !ok {
			r.report = report
		}
		if r.serveShim != nil {
			r.serveShim.Close()
			r.serveShim = nil
			if ok {
				r.openWork()
			}
		}
		if o := spec.Sandbox.Overlay; o != nil && !spec.Sandbox.UserNS {
			s.refillIdmaps(owner{o.UID, o.GID})
		}
	}
	r.mu.Lock()
	r.appendLocked(r.recordJSON())
	if spec.Wall > 0 {
		r.wall = time.AfterFunc(spec.Wall, func() {
			r.End(fmt.Sprintf("%s of %s exceeded", wallEnded, spec.Wall))
		})
	}
	r.mu.Unlock()
	if r.in != nil && len(spec.Stdin) > 0 {
		// The input given at the start comes first, before any write.
		r.in.mu <- struct{}{}
		go func() {
			r.in.f.Write(spec.Stdin)
			r.in.unlock()
		}()
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go r.read(outR, "stdout", spec.Records, &readers)
	go r.read(errR, "stderr", false, &readers)
	go r.wait(outR, errR, &readers)
	return r, nil
}

func unwrapExec(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// abandon undoes a Start that failed before the process ran.
func (r *Run) abandon() {
	name := r.logf.Name()
	r.logf.Close()
	os.Remove(name)
	sandbox.RemoveWorkspace(r.spec.Dir)
	r.unsandbox()
	r.s.Cgroups.release(r.group)
	if r.in != nil {
		r.in.f.Close()
	}
}

// sandboxed makes cmd start the run in its sandbox: a uid of its own,
// which owns the workspace, its own socket, and the shim as the process
// the supervisor starts. It returns the write end of the status pipe,
// for the caller to close once the shim has started.
func (r *Run) sandboxed(cmd *exec.Cmd) (*os.File, error) {
	s := r.s
	sb := *r.spec.Sandbox
	sb.Binds = append([]sandbox.Bind(nil), sb.Binds...)
	var idmapNS *os.File
	if o := sb.Overlay; o != nil && !sb.UserNS {
		// Its lower's owner mapped to its uid in a namespace made ahead
		// (idmaps.go), when one is ready: the shim's fd after the status
		// pipe's (and the execs' socket's, which only a rootless run has).
		if uid, ns, ok := s.takeIdmap(owner{o.UID, o.GID}, r); ok {
			// Closed here once the shim has it (Start) or the run is
			// abandoned (unsandbox).
			r.uid, r.idmapNS, idmapNS = uid, ns, ns
			ov := *o
			ov.IdmapFD = 4
			if sb.Serve {
				ov.IdmapFD = 5
			}
			sb.Overlay = &ov
		}
	}
	if idmapNS == nil {
		r.uid = s.uids.acquire(r)
	}
	sb.UID, sb.GID = r.uid, r.uid
	sb.Argv, sb.Env = r.spec.Argv, r.spec.Env
	r.sandboxLimits = r.group.rlimits(r.spec.Limits)
	sb.Rlimits = r.sandboxLimits.sandboxRlimits()
	if sb.Dir == "" {
		sb.Dir = r.spec.Dir
	}
	// Rootless, the uid is the run's inside its user namespace, and
	// oxiosd's own outside: the workspace and the socket are already
	// that uid's.
	sockUID := uint32(os.Getuid())
	if !sb.UserNS {
		if err := sandbox.Chown(r.spec.Dir, r.uid); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		sockUID = r.uid
	}
	if o := sb.Overlay; o != nil {
		// The overlay's folders, in the workspace, the run's own.
		for _, d := range []string{o.Upper, o.Work} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return nil, fmt.Errorf("workspace: %w", err)
			}
			if !sb.UserNS {
				if err := sandbox.Chown(d, r.uid); err != nil {
					return nil, fmt.Errorf("workspace: %w", err)
				}
			}
		}
	}
	if r.spec.SocketAt != "" && s.Listen != nil {
		dir := s.SocketDir
		if dir == "" {
			dir = filepath.Join(filepath.Dir(s.dir), "sockets")
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		path := filepath.Join(dir, r.spec.ID+".sock")
		os.Remove(path)
		c, err := s.Listen(path, sockUID)
		if err != nil {
			return nil, fmt.Errorf("the run's socket: %w", err)
		}
		r.sock = c
		sb.Binds = append(sb.Binds, sandbox.Bind{Src: path, Path: r.spec.SocketAt, RW: true})
	}
	path, argv, env, attr, err := sandbox.Cmd(&sb)
	if err != nil {
		return nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	r.status = statusR
	cmd.Path, cmd.Args, cmd.Env, cmd.Dir, cmd.SysProcAttr = path, argv, env, "", attr
	cmd.Err = nil
	cmd.ExtraFiles = []*os.File{statusW}
	if sb.Serve {
		shim, execs, err := sandbox.ServePair()
		if err != nil {
			statusR.Close()
			statusW.Close()
			r.status = nil
			return nil, err
		}
		r.execs, r.serveShim = execs, shim
		cmd.ExtraFiles = append(cmd.ExtraFiles, shim)
	}
	if idmapNS != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, idmapNS)
		if 3+len(cmd.ExtraFiles)-1 != sb.Overlay.IdmapFD {
			return nil, fmt.Errorf("the user namespace of the run's work is not at fd %d", sb.Overlay.IdmapFD)
		}
	}
	return statusW, nil
}

// unsandbox gives back what the run's sandbox held: its uid, its socket.
func (r *Run) unsandbox() {
	if r.sock != nil {
		r.sock.Close()
		r.sock = nil
	}
	if r.status != nil {
		r.status.Close()
		r.status = nil
	}
	if r.serveShim != nil {
		r.serveShim.Close()
		r.serveShim = nil
	}
	if r.idmapNS != nil {
		r.idmapNS.Close()
		r.idmapNS = nil
	}
	if r.work != nil {
		r.work.Close()
		r.work = nil
	}
	if r.execs != nil {
		r.execs.Close()
	}
	if r.uid != 0 {
		r.s.uids.release(r.uid)
	}
}

// read turns a stream into records, a line each.
func (r *Run) read(f *os.File, stream string, records bool, wg *sync.WaitGroup) {
	defer wg.Done()
	defer f.Close()
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 32<<10)
	// A record (the runner's JSON line) may be long; plain output is cut
	// into lines of at most maxLine.
	lim := maxLine
	if records {
		lim = maxRecord
	}
	var emit func(line []byte)
	emit = func(line []byte) {
		for len(line) > lim {
			emit(line[:lim])
			line = line[lim:]
		}
		if records && len(line) > 1 && line[0] == '{' && json.Valid(line) {
			r.append(line)
			return
		}
		rec := proto.OutputRecord{Type: proto.RecordOutput, Run: r.rec.ID, Agent: r.rec.Agent, Stream: stream, Time: time.Now().UTC(), Text: strings.ToValidUTF8(string(line), "\uFFFD")}
		b, _ := json.Marshal(&rec)
		r.append(b)
	}
	for {
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := indexByte(buf, '\n')
			if i < 0 {
				break
			}
			emit(buf[:i])
			buf = buf[i+1:]
		}
		for len(buf) >= lim {
			emit(buf[:lim])
			buf = buf[lim:]
		}
		if len(buf) == 0 {
			buf = buf[:0:cap(buf)]
		}
		if err != nil {
			if len(buf) > 0 {
				emit(buf)
			}
			return
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// wait reaps the leader, drains its output and logs the exit record.
func (r *Run) wait(outR, errR *os.File, readers *sync.WaitGroup) {
	s := r.s
	defer s.live.Done()
	err := r.cmd.Wait()
	r.endStdin()
	// The run has ended when its leader has: what is left in its cgroup
	// ends with it.
	hits := r.group.Hits()
	r.group.Remove()
	s.Cgroups.release(r.group)
	// A grandchild may still hold the pipes: the run has ended when its
	// leader has, so what it wrote so far is read and then no more.
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(200 * time.Millisecond):
		outR.SetReadDeadline(time.Now())
		errR.SetReadDeadline(time.Now())
		<-drained
	}
	now := time.Now().UTC()
	ex := proto.ExitRecord{Type: proto.RecordExit, Run: r.rec.ID, Agent: r.rec.Agent, Time: now, Limits: hits.String()}
	ws, _ := r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case r.status != nil && !ws.Signaled():
		// The shim's report: how the command itself ended.
		st := sandbox.ReadStatus(r.status, r.report)
		switch {
		case st.Err != "":
			ex.Status = max(ws.ExitStatus(), 1)
			ex.Error = st.Err
		case st.Exited:
			ex.Status = st.Code
		default:
			ex.Status = 128 + int(st.Signal)
			ex.Signal = SignalName(st.Signal)
		}
	case ws.Signaled():
		ex.Status = 128 + int(ws.Signal())
		ex.Signal = SignalName(ws.Signal())
	default:
		ex.Status = ws.ExitStatus()
	}
	if err != nil && ex.Status == 0 && !ws.Signaled() {
		ex.Status = 1
		ex.Error = err.Error()
	}
	r.mu.Lock()
	if r.wall != nil {
		r.wall.Stop()
	}
	if r.reason != "" {
		ex.Error = r.reason
	}
	ex.Text = exitText(&ex)
	b, _ := json.Marshal(&ex)
	st := ex.Status
	r.rec.State = proto.RunExited
	r.rec.Ended = &now
	r.rec.Status = &st
	r.rec.Signal = ex.Signal
	r.rec.Error = ex.Error
	r.rec.Limits = ex.Limits
	r.rec.Text = runText(&r.rec)
	r.held = r.size
	r.appendLocked(b)
	r.mu.Unlock()
	if r.spec.Work != "" && s.Harvest != nil {
		s.Harvest(r)
	}
	sandbox.RemoveWorkspace(r.spec.Dir)
	r.unsandbox()
	s.mu.Lock()
	delete(s.byPID, r.rec.PID)
	clear(s.who)
	s.ended = append(s.ended, r.rec.ID)
	prune := s.pruneLocked()
	s.mu.Unlock()
	r.logf.Close()
	for _, id := range prune {
		s.removeFiles(id)
	}
	// OnExit before done: whoever waited for the run finds its exit
	// recorded and its slot given back (ox-wait r1; ox-spawn ... must
	// not queue behind r1).
	if s.OnExit != nil {
		s.OnExit(r)
	}
	close(r.done)
}

func exitText(ex *proto.ExitRecord) string {
	var t string
	if ex.Signal != "" {
		t = "killed by SIG" + ex.Signal
	} else {
		t = fmt.Sprintf("exit status %d", ex.Status)
	}
	if ex.Error != "" {
		t += ": " + ex.Error
	}
	if ex.Limits != "" {
		t += " (" + ex.Limits + ")"
	}
	return t
}

func runText(r *proto.RunRecord) string {
	what := r.Task
	if len(r.Command) > 0 {
		what = strings.Join(r.Command, " ")
	}
	switch r.State {
	case proto.RunExited:
		if r.Signal != "" {
			return fmt.Sprintf("%s %s: killed by SIG%s", r.ID, what, r.Signal)
		}
		return fmt.Sprintf("%s %s: exit %d", r.ID, what, *r.Status)
	}
	return fmt.Sprintf("%s %s: %s", r.ID, what, r.State)
}

// End ends the run: TERM now, KILL after Grace.
func (r *Run) End(reason string) {
	r.mu.Lock()
	if r.reason == "" {
		r.reason = reason
	}
	r.mu.Unlock()
	r.signal(syscall.SIGTERM)
	r.signal(syscall.SIGCONT) // a stopped run must wake to die
	t := time.NewTimer(Grace)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		r.signal(syscall.SIGKILL)
	}
}

// OverBudget ends r, a run refused for its budget (why), if it does not
// end itself within Grace (EndUnlessDone: the runner ends with a record
// saying why; a process that ignores the refusal is stopped). A nil r
// (the caller was no run) is left be.
func (r *Run) OverBudget(why string) {
	if r != nil {
		r.EndUnlessDone("over budget: " + why)
	}
}

// EndUnlessDone gives the run Grace to end by itself (a runner told why
// ends with a record saying so), then ends it (End) with reason. It
// returns at once.
func (r *Run) EndUnlessDone(reason string) {
	go func() {
		t := time.NewTimer(Grace)
		defer t.Stop()
		select {
		case <-r.done:
		case <-t.C:
			r.End(reason)
		}
	}()
}

// Signal sends sig to the run's process group.
func (r *Run) Signal(sig syscall.Signal) error {
	select {
	case <-r.done:
		return proto.Errorf(proto.ESRCH, "run %s has exited", r.rec.ID)
	default:
	}
	if err := r.signal(sig); err != nil {
		return proto.Errorf(proto.ESRCH, "run %s: %v", r.rec.ID, err)
	}
	r.mu.Lock()
	switch sig {
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		if r.rec.State == proto.RunRunning {
			r.rec.State = proto.RunStopped
		}
	case syscall.SIGCONT:
		if r.rec.State == proto.RunStopped {
			r.rec.State = proto.RunRunning
		}
	}
	r.mu.Unlock()
	return nil
}

func (r *Run) signal(sig syscall.Signal) error {
	err := syscall.Kill(-r.rec.PID, sig)
	// Processes of the run that left its process group are still in its
	// cgroup.
	for _, pid := range r.group.Procs() {
		if pgidOf(pid) != r.rec.PID {
			syscall.Kill(pid, sig)
		}
	}
	return err
}

// append adds a record (one JSON object, no newline) to the run's log.
func (r *Run) append(b []byte) {
	r.mu.Lock()
	r.appendLocked(b)
	r.mu.Unlock()
}

func (r *Run) appendLocked(b []byte) {
	line := make([]byte, 0, len(b)+1)
	line = append(append(line, b...), '\n')
	if _, err := r.logf.Write(line); err != nil {
		r.s.log.Error("run log", "run", r.rec.ID, "err", err)
		return
	}
	r.size += int64(len(line))
	if r.sum != nil {
		r.sum.Write(line)
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// Emit adds a record made by the kernel (a budget refusal...) to the log
// of a live run.
func (r *Run) Emit(rec any) {
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
	default:
		r.appendLocked(b)
	}
}

func (r *Run) recordJSON() []byte {
	rec := r.rec
	rec.Text = runText(&rec)
	b, _ := json.Marshal(&rec)
	return b
}

// Record returns the run's record, with resources sampled from /proc
// while it runs.
func (r *Run) Record() proto.RunRecord {
	r.mu.Lock()
	rec := r.rec
	rec.Tokens, rec.Cost, rec.Execs = r.Tokens, r.Cost, r.Execs
	live := rec.State != proto.RunExited && rec.State != proto.RunLost
	r.mu.Unlock()
	if live {
		if st, err := readStat(rec.PID); err == nil {
			rec.CPU = st.cpu
			rec.RSS = st.rss
			if st.state == 'T' {
				rec.State = proto.RunStopped
			} else if rec.State == proto.RunStopped {
				rec.State = proto.RunRunning
			}
		}
	}
	rec.Text = runText(&rec)
	return rec
}

// Charge adds usage to the run.
func (r *Run) Charge(tokens int64, cost float64, execs int64) {
	r.mu.Lock()
	r.Tokens += tokens
	r.Cost = proto.AddCost(r.Cost, cost)
	r.Execs += execs
	r.mu.Unlock()
}

// Usage returns what the run has used.
func (r *Run) Usage() (tokens int64, cost float64, execs int64, wall time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := time.Now()
	if r.rec.Ended != nil {
		end = *r.rec.Ended
	}
	return r.Tokens, r.Cost, r.Execs, end.Sub(r.rec.Started)
}

// Follow calls fn with each record of the run, from its first, until its
// exit record (or ctx ends). A run that ended long ago is read from its
// log on disk.
func (r *Run) Follow(ctx context.Context, fn func(rec []byte) error) error {
	f, err := os.Open(filepath.Join(r.s.dir, r.rec.ID+".jsonl"))
	if err != nil {
		return proto.Errorf(proto.ENOENT, "run %s: its records are gone: %v", r.rec.ID, err)
	}
	defer f.Close()
	var off int64
	var pending []byte
	buf := make([]byte, 64<<10)
	for {
		r.mu.Lock()
		size, changed := r.size, r.changed
		if r.held > 0 {
			size = r.held // the exit record, once OnExit has run (done)
		}
		r.mu.Unlock()
		ended := false
		select {
		case <-r.done:
			ended = true
			r.mu.Lock()
			size = r.size
			r.mu.Unlock()
		default:
		}
		for off < size {
			n := len(buf)
			if rem := size - off; rem < int64(n) {
				n = int(rem)
			}
			m, err := f.ReadAt(buf[:n], off)
			if m == 0 && err != nil {
				return err
			}
			off += int64(m)
			pending = append(pending, buf[:m]...)
			for {
				i := indexByte(pending, '\n')
				if i < 0 {
					break
				}
				if err := fn(pending[:i]); err != nil {
					return err
				}
				pending = pending[i+1:]
			}
		}
		if ended {
			return nil
		}
		select {
		case <-changed:
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Get returns a run by id.
func (s *Supervisor) Get(id string) (*Run, bool) {
	s.mu.RLock()
	r, ok := s.runs[id]
	s.mu.RUnlock()
	return r, ok
}

// Has reports whether s knows run id (live or kept).
func (s *Supervisor) Has(id string) bool {
	_, ok := s.Get(id)
	return ok
}

// Status is the exit status of run id, nil while it runs or when s does
// not know it.
func (s *Supervisor) Status(id string) *int {
	if r, ok := s.Get(id); ok {
		return r.Record().Status
	}
	return nil
}

// Runs returns the runs, oldest first: the live ones, and with all the
// ended ones kept too.
func (s *Supervisor) Runs(all bool) []*Run {
	s.mu.RLock()
	out := make([]*Run, 0, len(s.runs))
	for _, r := range s.runs {
		out = append(out, r)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].rec.Started, out[j].rec.Started
		if !a.Equal(b) {
			return a.Before(b)
		}
		return out[i].rec.ID < out[j].rec.ID
	})
	if !all {
		live := out[:0]
		for _, r := range out {
			select {
			case <-r.done:
			default:
				live = append(live, r)
			}
		}
		out = live
	}
	return out
}

// Live returns the number of runs not yet exited.
func (s *Supervisor) Live() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byPID)
}

// RunOf returns the live run whose process tree pid is in: the run whose
// process group it is in, or whose leader is an ancestor of it.
func (s *Supervisor) RunOf(pid int32) (*Run, bool) {
	s.mu.RLock()
	if len(s.byPID) == 0 {
		s.mu.RUnlock()
		return nil, false
	}
	if r, ok := s.who[int(pid)]; ok {
		s.mu.RUnlock()
		return r, r != nil
	}
	s.mu.RUnlock()
	r := s.lookup(int(pid))
	s.mu.Lock()
	if len(s.who) > 4096 {
		clear(s.who)
	}
	s.who[int(pid)] = r
	s.mu.Unlock()
	return r, r != nil
}

func (s *Supervisor) lookup(pid int) *Run {
	self := os.Getpid()
	for i := 0; i < 64 && pid > 1 && pid != self; i++ {
		s.mu.RLock()
		r := s.byPID[pid]
		s.mu.RUnlock()
		if r != nil {
			return r
		}
		st, err := readStat(pid)
		if err != nil {
			return nil
		}
		s.mu.RLock()
		r = s.byPID[st.pgid]
		s.mu.RUnlock()
		if r != nil {
			return r
		}
		pid = st.ppid
	}
	return nil
}

// Close ends every live run (TERM, then KILL after Grace) and waits for
// them to be reaped.
func (s *Supervisor) Close() {
	s.mu.Lock()
	s.closed = true
	var live []*Run
	for _, r := range s.byPID {
		live = append(live, r)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range live {
		wg.Add(1)
		go func() { defer wg.Done(); r.End("oxiosd stopped") }()
	}
	wg.Wait()
	s.live.Wait()
	s.closeIdmaps()
	s.Cgroups.Close()
}

// load reads the logs of earlier runs: a log's first record is its run
// record, and its last the exit record once the run ended. A run whose
// log has no exit record was running when oxiosd stopped: it is marked
// lost, with an exit record saying so.
func (s *Supervisor) load() error {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.jsonl"))
	if err != nil {
		return err
	}
	var all []*Run
	for _, name := range names {
		rec, ex, size, err := readLog(name)
		if err != nil {
			s.log.Warn("run log unreadable, skipped", "file", name, "err", err)
			continue
		}
		r := &Run{s: s, rec: rec, changed: make(chan struct{}), done: make(chan struct{}), size: size}
		close(r.done)
		if ex == nil {
			now := time.Now().UTC()
			ex = &proto.ExitRecord{Type: proto.RecordExit, Run: rec.ID, Agent: rec.Agent, Status: 255, Error: "oxiosd stopped while the run ran", Time: now}
			ex.Text = "lost: " + ex.Error
			b, _ := json.Marshal(ex)
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0o600)
			if err == nil {
				n, _ := f.Write(append(b, '\n'))
				r.size += int64(n)
				f.Close()
			}
			r.rec.State = proto.RunLost
			if rec.Workspace != "" {
				sandbox.RemoveWorkspace(rec.Workspace)
			}
		} else {
			r.rec.State = proto.RunExited
		}
		st := ex.Status
		r.rec.Status, r.rec.Signal, r.rec.Error, r.rec.Ended = &st, ex.Signal, ex.Error, &ex.Time
		r.rec.Limits = ex.Limits
		r.rec.Text = runText(&r.rec)
		all = append(all, r)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].rec.Started.Before(all[j].rec.Started) })
	for _, r := range all {
		s.runs[r.rec.ID] = r
		s.ended = append(s.ended, r.rec.ID)
	}
	for _, id := range s.pruneLocked() {
		s.removeFiles(id)
	}
	return nil
}

// readLog reads a run's log: its first record (the run record), its
// last if that is the exit record, and its size.
func readLog(name string) (proto.RunRecord, *proto.ExitRecord, int64, error) {
	var rec proto.RunRecord
	f, err := os.Open(name)
	if err != nil {
		return rec, nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rec, nil, 0, err
	}
	size := fi.Size()
	head := make([]byte, min(size, 1<<20))
	if _, err := f.ReadAt(head, 0); err != nil {
		return rec, nil, 0, err
	}
	first, _, _ := bytes.Cut(head, []byte("\n"))
	if err := json.Unmarshal(first, &rec); err != nil || rec.Type != proto.RecordRun || rec.ID == "" {
		return rec, nil, 0, fmt.Errorf("first line is not a run record")
	}
	tailLen := min(size, 64<<10)
	tail := make([]byte, tailLen)
	if _, err := f.ReadAt(tail, size-tailLen); err != nil {
		return rec, nil, 0, err
	}
	// A torn last line (a crash mid-write) is cut off, so that whatever
	// is appended next starts a line of its own.
	if tail[len(tail)-1] != '\n' {
		size -= tailLen - int64(bytes.LastIndexByte(tail, '\n')+1)
		if err := os.Truncate(name, size); err != nil {
			return rec, nil, 0, err
		}
		return rec, nil, size, nil
	}
	tail = tail[:len(tail)-1]
	last := tail[bytes.LastIndexByte(tail, '\n')+1:]
	var ex proto.ExitRecord
	if json.Unmarshal(last, &ex) == nil && ex.Type == proto.RecordExit && ex.Run == rec.ID {
		return rec, &ex, size, nil
	}
	return rec, nil, size, nil
}

// pruneLocked forgets the oldest ended runs beyond Keep and returns them.
func (s *Supervisor) pruneLocked() []string {
	if len(s.ended) <= s.Keep {
		return nil
	}
	n := len(s.ended) - s.Keep
	old := append([]string(nil), s.ended[:n]...)
	s.ended = append(s.ended[:0], s.ended[n:]...)
	for _, id := range old {
		delete(s.runs, id)
	}
	return old
}

// LogPath is the file of run id's log (its records, one a line).
func (s *Supervisor) LogPath(id string) string { return filepath.Join(s.dir, id+".jsonl") }

func (s *Supervisor) removeFiles(id string) {
	os.Remove(filepath.Join(s.dir, id+".jsonl"))
}

// SetLimits applies l to the process pid.
func SetLimits(pid int, l Limits) error {
	return errors.Join(setLimits(l, func(res int, lim *unix.Rlimit) error {
		if err := unix.Prlimit(pid, res, lim, nil); err != nil {
			return fmt.Errorf("%s: %w", rlimitName(res), err)
		}
		return nil
	})...)
}

// sandboxRlimits are l as a sandbox's shim sets them on itself.
func (l Limits) sandboxRlimits() []sandbox.Rlimit {
	var out []sandbox.Rlimit
	setLimits(l, func(res int, lim *unix.Rlimit) error {
		out = append(out, sandbox.Rlimit{Resource: res, Max: lim.Max})
		return nil
	})
	return out
}

func rlimitName(res int) string {
	switch res {
	case unix.RLIMIT_DATA:
		return "RLIMIT_DATA"
	case unix.RLIMIT_CPU:
		return "RLIMIT_CPU"
	case unix.RLIMIT_NPROC:
		return "RLIMIT_NPROC"
	case unix.RLIMIT_NOFILE:
		return "RLIMIT_NOFILE"
	}
	return fmt.Sprint("rlimit ", res)
}

// setLimits calls set with each limit of l that is set.
func setLimits(l Limits, set func(res int, lim *unix.Rlimit) error) []error {
	var errs []error
	add := func(res int, v uint64) {
		if v == 0 {
			return
		}
		lim := unix.Rlimit{Cur: v, Max: v}
		if err := set(res, &lim); err != nil {
			errs = append(errs, err)
		}
	}
	add(unix.RLIMIT_DATA, l.Memory)
	add(unix.RLIMIT_CPU, l.CPU)
	add(unix.RLIMIT_NPROC, l.Processes)
	add(unix.RLIMIT_NOFILE, l.OpenFiles)
	return errs
}
