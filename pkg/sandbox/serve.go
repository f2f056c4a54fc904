package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A rootless run's workspace is a tmpfs that its shim mounts inside the
// run's mount namespace (Bind.Tmpfs): an ordinary user can mount nothing
// on the host, and a tmpfs is what bounds the workspace (limits.disk) so
// that a run that fills it gets ENOSPC and DATA's filesystem keeps every
// byte it had. No other process can bind a mount of that namespace into
// its own (the kernel refuses a bind from a foreign mount namespace, and
// open_tree(OPEN_TREE_CLONE) needs CAP_SYS_ADMIN where the daemon has
// none), so the execs of such a run, which work in its workspace, start
// inside the run: oxiosd asks the run's shim, the init of its
// namespaces, on a socket (ServeFD), and the shim starts each as a
// process of the run, with the run's walls (namespaces, Landlock,
// seccomp, rlimits, uid) already on it, and stdio that oxiosd passes
// with the request. oxiosd itself (a WASM tool's files) reaches the
// workspace through the shim's /proc/PID/root.

// ServeFD is the shim's end of the socket on which it serves execs.
const ServeFD = 4

// ExecRequest asks a run's shim to start an exec (Argv, Env, Dir; the
// request carries its stdin, stdout and stderr), or to kill one (Kill).
type ExecRequest struct {
	ID   uint64   `json:"id"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	Kill bool     `json:"kill,omitempty"`
}

// ExecReply is the shim's answer to a request: the exec started (Pid),
// could not start (Err), or ended (Done: Exited with Code, else killed
// by Signal).
type ExecReply struct {
	ID     uint64 `json:"id"`
	Pid    int    `json:"pid,omitempty"`
	Err    string `json:"err,omitempty"`
	Done   bool   `json:"done,omitempty"`
	Exited bool   `json:"exited,omitempty"`
	Code   int    `json:"code,omitempty"`
	Signal int    `json:"signal,omitempty"`
	// Upper: the message carries the shim's open folder of the tmpfs of
	// its overlay's upper layer (Overlay.Size), sent once, first; with no
	// file, the overlay refused the tmpfs and its upper layer is the
	// spec's, on DATA's disk.
	Upper bool `json:"upper,omitempty"`
}

// server is the shim's side: it starts what oxiosd asks and tells it
// when each ends (reaped, from the shim's reaping loop).
type server struct {
	conn  *net.UnixConn
	wmu   sync.Mutex
	mu    sync.Mutex
	byPid map[int]uint64
	byID  map[uint64]int
}

// serve starts serving execs on f, in the sandbox built for spec.
func serve(f *os.File, spec *Spec) *server {
	unix.CloseOnExec(int(f.Fd()))
	if err := sendUpper(int(f.Fd())); err != nil {
		fmt.Fprintf(os.Stderr, "oxios sandbox: %v\n", err)
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "oxios sandbox: serving execs: %v\n", err)
		return nil
	}
	s := &server{conn: c.(*net.UnixConn), byPid: map[int]uint64{}, byID: map[uint64]int{}}
	go s.loop(spec)
	return s
}

func (s *server) send(r ExecReply) {
	b, _ := json.Marshal(r)
	s.wmu.Lock()
	s.conn.Write(b)
	s.wmu.Unlock()
}

func (s *server) loop(spec *Spec) {
	// Every exec is forked, and every kill of one sent, from this one
	// thread. Landlock gave each thread of the shim a domain of its own
	// (restrict_self is a thread's; go-landlock calls it on each), and
	// from ABI 6 a domain may signal only processes in it or below it: an
	// exec forked from one thread was in that thread's domain, and a kill
	// sent from another thread failed with EPERM, so the exec outlived
	// its kill (pkg/sandbox's TestServe, now and then under load, when
	// the goroutine had moved between threads).
	runtime.LockOSThread()
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := s.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return // oxiosd closed its end: nothing more to start
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if r, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, r...)
				}
			}
		}
		var req ExecRequest
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			closeAll(fds)
			continue
		}
		if req.Kill {
			s.mu.Lock()
			if pid, ok := s.byID[req.ID]; ok {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			s.mu.Unlock()
			closeAll(fds)
			continue
		}
		s.start(req, fds, spec)
	}
}

// start starts req with the stdio fds, under the lock the reaping loop
// takes: an exec that ends at once is reaped only once it is known.
func (s *server) start(req ExecRequest, fds []int, spec *Spec) {
	defer closeAll(fds)
	if len(fds) != 3 || len(req.Argv) == 0 {
		s.send(ExecReply{ID: req.ID, Err: "a request to start an exec needs its command and three stdio files"})
		return
	}
	dir := req.Dir
	if dir == "" {
		dir = spec.Dir
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, err := syscall.ForkExec(req.Argv[0], req.Argv, &syscall.ProcAttr{
		Dir: dir, Env: req.Env, Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		s.send(ExecReply{ID: req.ID, Err: fmt.Sprintf("%s: %v", req.Argv[0], err)})
		return
	}
	s.byPid[pid], s.byID[req.ID] = req.ID, pid
	s.send(ExecReply{ID: req.ID, Pid: pid})
}

// reaped tells oxiosd that pid, one of its execs, ended with ws; any
// other child (an orphan) is none of its business. s may be nil.
func (s *server) reaped(pid int, ws syscall.WaitStatus) {
	if s == nil {
		return
	}
	s.mu.Lock()
	id, ok := s.byPid[pid]
	if ok {
		delete(s.byPid, pid)
		delete(s.byID, id)
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	r := ExecReply{ID: id, Done: true, Exited: ws.Exited(), Code: ws.ExitStatus()}
	if ws.Signaled() {
		r.Signal = int(ws.Signal())
	}
	s.send(r)
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// ErrRunEnded is the error of an exec asked of a run that has ended.
var ErrRunEnded = errors.New("the run has ended")

// Execs is oxiosd's side of a run's shim that serves execs.
type Execs struct {
	conn    *net.UnixConn
	wmu     sync.Mutex
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan ExecReply
	closed  bool
	// upper: the folder of the upper layer's tmpfs (Upper), under mu;
	// upperOnData: the shim said the upper layer is on DATA's disk;
	// upperKnown is closed once either came or the shim's end closed.
	upper       *os.File
	upperOnData bool
	upperKnown  chan struct{}
	upperOnce   sync.Once
}

// ServePair makes the socket of a shim that serves execs: the shim's end
// (to be its fd ServeFD, and closed here once it started) and oxiosd's.
func ServePair() (shim *os.File, ours *Execs, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("the socket of the run's execs: %w", err)
	}
	shim = os.NewFile(uintptr(fds[1]), "serve")
	f := os.NewFile(uintptr(fds[0]), "execs")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		shim.Close()
		return nil, nil, err
	}
	e := &Execs{conn: c.(*net.UnixConn), waiting: map[uint64]chan ExecReply{}, upperKnown: make(chan struct{})}
	go e.read()
	return shim, e, nil
}

func (e *Execs) read() {
	defer e.upperOnce.Do(func() { close(e.upperKnown) })
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := e.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			break
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if r, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, r...)
				}
			}
		}
		var r ExecReply
		if json.Unmarshal(buf[:n], &r) != nil {
			closeAll(fds)
			continue
		}
		if r.Upper {
			e.takeUpper(fds)
			continue
		}
		closeAll(fds) // only the upper layer's message carries a file
		e.mu.Lock()
		ch := e.waiting[r.ID]
		if r.Done || r.Err != "" {
			delete(e.waiting, r.ID)
		}
		e.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	e.mu.Lock()
	e.closed = true
	for id, ch := range e.waiting {
		close(ch)
		delete(e.waiting, id)
	}
	e.mu.Unlock()
}

// takeUpper keeps the folder of the upper layer's tmpfs the shim sent
// (the first one; any other file is closed), or that it sent none (the
// upper layer is on DATA's disk), and lets Upper return.
func (e *Execs) takeUpper(fds []int) {
	e.mu.Lock()
	switch {
	case len(fds) == 1 && e.upper == nil && !e.upperOnData:
		unix.CloseOnExec(fds[0])
		e.upper = os.NewFile(uintptr(fds[0]), "upper")
		fds = nil
	case len(fds) == 0 && e.upper == nil:
		e.upperOnData = true
	}
	e.mu.Unlock()
	closeAll(fds)
	e.upperOnce.Do(func() { close(e.upperKnown) })
}

// Close closes oxiosd's end, and the upper layer's folder.
func (e *Execs) Close() error {
	e.mu.Lock()
	if e.upper != nil {
		e.upper.Close()
		e.upper = nil
	}
	e.mu.Unlock()
	return e.conn.Close()
}

// Upper is the path by which oxiosd reaches the upper layer of the
// overlay of a rootless run or exec (Overlay.Size) once it has ended:
// upper/ of the folder of the tmpfs its shim sent, or onData (the
// spec's Overlay.Upper) when the shim said the overlay refused the
// tmpfs. It waits at most wait for the shim's message; "" if none came
// (the shim ended without one). The path holds until Close.
func (e *Execs) Upper(wait time.Duration, onData string) string {
	select {
	case <-e.upperKnown:
	case <-time.After(wait):
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.upper != nil:
		return fmt.Sprintf("/proc/self/fd/%d/upper", e.upper.Fd())
	case e.upperOnData:
		return onData
	}
	return ""
}

// Start asks the shim to start argv with env in dir ("" for the
// workspace) and stdio: replies has its answers, first the start (Pid or
// Err), then its end (Done); it is closed without them if the run ends
// first. Kill(id) kills the exec's process group.
func (e *Execs) Start(argv, env []string, dir string, stdio [3]*os.File) (id uint64, replies <-chan ExecReply, err error) {
	ch := make(chan ExecReply, 2)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return 0, nil, ErrRunEnded
	}
	e.next++
	id = e.next
	e.waiting[id] = ch
	e.mu.Unlock()
	b, err := json.Marshal(ExecRequest{ID: id, Argv: argv, Env: env, Dir: dir})
	if err != nil {
		return 0, nil, err
	}
	rights := unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	e.wmu.Lock()
	_, _, err = e.conn.WriteMsgUnix(b, rights, nil)
	e.wmu.Unlock()
	if err != nil {
		e.mu.Lock()
		delete(e.waiting, id)
		e.mu.Unlock()
		return 0, nil, fmt.Errorf("asking the run for an exec: %w", err)
	}
	return id, ch, nil
}

// Kill asks the shim to kill exec id's process group.
func (e *Execs) Kill(id uint64) error {
	b, _ := json.Marshal(ExecRequest{ID: id, Kill: true})
	e.wmu.Lock()
	defer e.wmu.Unlock()
	_, err := e.conn.Write(b)
	return err
}
