package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// A root oxiosd makes the user namespaces of runs on host folders ahead
// of the runs (Overlay.IdmapFD), in a process of its own, the idmap
// maker: making one takes a helper process started in it (userNSOf),
// and a Go program forks a child that starts in a new user namespace
// without vfork (it waits for its id maps), copying the whole of its
// parent's address space: for oxiosd, tens of megabytes of page tables
// and copy-on-write faults after, which slowed the runs starting beside
// it; for the maker, a small program, little.

// idmapsName is the argv[0] of the maker: it answers requests on fd 3.
const idmapsName = "oxios-sandbox-idmaps"

// idmapsMain is the maker: each request on fd 3 (four uint32: from uid
// and gid, to uid and gid) is answered with an open user namespace in
// which from are to (a byte 0, the namespace's fd), or why not (the
// text). It ends when oxiosd closes its end. It works at the lowest
// priority, on one thread, whose niceness its helpers inherit: it makes
// ahead what runs may take later, and must not slow the runs starting.
func idmapsMain() {
	runtime.LockOSThread()
	unix.Setpriority(unix.PRIO_PROCESS, 0, 19) // this thread (Linux)
	req := make([]byte, 16)
	for {
		n, err := unix.Read(3, req)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != len(req) {
			os.Exit(0)
		}
		id := func(i int) uint32 { return binary.LittleEndian.Uint32(req[4*i:]) }
		ns, done, err := userNSOf(id(0), id(1), id(2), id(3))
		if err != nil {
			unix.Write(3, []byte(err.Error()))
			continue
		}
		unix.Sendmsg(3, []byte{0}, unix.UnixRights(ns), nil, 0)
		done()
	}
}

// IdmapMaker is oxiosd's side of the maker, started at the first call.
type IdmapMaker struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	conn *os.File
	err  error // the maker could not start: every call fails so
}

// start starts the maker (under mu).
func (m *IdmapMaker) start() error {
	if m.conn != nil || m.err != nil {
		return m.err
	}
	exe, err := initPath()
	if err != nil {
		m.err = err
		return err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "idmaps"), os.NewFile(uintptr(fds[1]), "idmaps")
	defer theirs.Close()
	cmd := &exec.Cmd{Path: exe, Args: []string{idmapsName}, Env: append([]string{"GOMAXPROCS=1"}, RaceEnv...), ExtraFiles: []*os.File{theirs}, Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		ours.Close()
		m.err = fmt.Errorf("the idmap maker: %w", err)
		return m.err
	}
	m.cmd, m.conn = cmd, ours
	return nil
}

// Make is an open user namespace in which host ids (fromUID, fromGID)
// are (toUID, toGID), for a run's Overlay.IdmapFD.
func (m *IdmapMaker) Make(fromUID, fromGID, toUID, toGID uint32) (*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.start(); err != nil {
		return nil, err
	}
	req := make([]byte, 16)
	for i, v := range []uint32{fromUID, fromGID, toUID, toGID} {
		binary.LittleEndian.PutUint32(req[4*i:], v)
	}
	fd := int(m.conn.Fd())
	if _, err := unix.Write(fd, req); err != nil {
		m.stopLocked()
		return nil, fmt.Errorf("asking the idmap maker: %w", err)
	}
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n == 0 {
		m.stopLocked()
		return nil, fmt.Errorf("the idmap maker ended: %v", err)
	}
	var got []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, c := range msgs {
			if r, err := unix.ParseUnixRights(&c); err == nil {
				got = append(got, r...)
			}
		}
	}
	if n == 1 && buf[0] == 0 && len(got) == 1 {
		return os.NewFile(uintptr(got[0]), "userns"), nil
	}
	closeAll(got)
	return nil, errors.New("the idmap maker: " + string(buf[:n]))
}

// stopLocked ends the maker; the next call starts another.
func (m *IdmapMaker) stopLocked() {
	if m.conn == nil {
		return
	}
	m.conn.Close()
	m.cmd.Wait()
	m.conn, m.cmd = nil, nil
}

// Close ends the maker.
func (m *IdmapMaker) Close() {
	m.mu.Lock()
	m.stopLocked()
	m.mu.Unlock()
}
