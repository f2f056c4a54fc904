package server

import (
	"net"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A listener with SO_PASSCRED (systemd's PassCredentials=yes) passes it to
// the sockets it accepts; peerCred clears it, since a read of a socket
// with it set stops where the writer changes, and the idle wait reads on
// only after a read that filled its buffer (rawio.Reader.Feed).
func TestPeerCredClearsPassCred(t *testing.T) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lrc, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	lrc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
	if serr != nil {
		t.Fatal(serr)
	}
	cc, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	passcred := func() int {
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		v, gerr := 0, error(nil)
		rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED) })
		if gerr != nil {
			t.Fatal(gerr)
		}
		return v
	}
	if passcred() == 0 {
		t.Fatal("the accepted socket did not inherit SO_PASSCRED: the test proves nothing here")
	}
	uc, err := peerCred(c)
	if err != nil || uc.Pid == 0 {
		t.Fatalf("peerCred = %+v, %v", uc, err)
	}
	if passcred() != 0 {
		t.Fatal("SO_PASSCRED still set after peerCred")
	}
}
