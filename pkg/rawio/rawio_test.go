package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// pair returns the two ends of a real Unix socket connection.
func pair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan *net.UnixConn, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	a, err = net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	b = <-done
	if b == nil {
		t.FailNow()
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func raw(t *testing.T, c *net.UnixConn) syscall.RawConn {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// A write far larger than the socket's buffer waits for room, as often
// as it takes, and the reader, which waits for bytes, gets every one in
// order.
func TestWriteWaitsForRoomReadWaitsForBytes(t *testing.T) {
	a, b := pair(t)
	msg := make([]byte, 8<<20)
	for i := range msg {
		msg[i] = byte(i * 7 / 5)
	}
	werr := make(chan error, 1)
	go func() {
		n, err := NewWriter(raw(t, a)).Write(msg)
		if err == nil && n != len(msg) {
			err = io.ErrShortWrite
		}
		a.CloseWrite()
		werr <- err
	}()
	// Read slowly at first, so the writer finds the socket full.
	time.Sleep(50 * time.Millisecond)
	got, err := io.ReadAll(NewReader(raw(t, b)))
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(msg))
	}
}

func TestReadEndsWithEOF(t *testing.T) {
	a, b := pair(t)
	if _, err := NewWriter(raw(t, a)).Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	r := NewReader(raw(t, b))
	buf := make([]byte, 16)
	n, err := r.Read(buf)
	if err != nil || string(buf[:n]) != "last" {
		t.Fatalf("read %q, %v; want \"last\"", buf[:n], err)
	}
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v; want 0, io.EOF", n, err)
	}
}

// Deadlines are the connection's, as with its own Read and Write.
func TestDeadlines(t *testing.T) {
	a, b := pair(t)
	b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	t0 := time.Now()
	if _, err := NewReader(raw(t, b)).Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with nothing sent: %v; want a deadline error", err)
	}
	if d := time.Since(t0); d < 15*time.Millisecond {
		t.Fatalf("the read gave up after %v, before its deadline", d)
	}
	// Nobody reads b: a big write fills the socket and stops at the deadline.
	a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := NewWriter(raw(t, a)).Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write nobody reads: %d, %v; want a deadline error", n, err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("write stopped by its deadline reports %d bytes written", n)
	}
}

func TestClosedAndReset(t *testing.T) {
	a, b := pair(t)
	r := NewReader(raw(t, b))
	b.Close()
	if _, err := r.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a closed connection: %v; want net.ErrClosed", err)
	}
	// The peer is gone: a write fails with the errno, named.
	w := NewWriter(raw(t, a))
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = w.Write([]byte("x"))
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write to a closed peer: %v; want EPIPE or ECONNRESET", err)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "write" {
		t.Fatalf("write error %v does not name the call", err)
	}
}

// An empty read or write makes no system call and waits for nothing.
func TestEmpty(t *testing.T) {
	_, b := pair(t)
	if n, err := NewReader(raw(t, b)).Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
	if n, err := NewWriter(raw(t, b)).Write(nil); n != 0 || err != nil {
		t.Fatalf("empty write: %d, %v", n, err)
	}
}

// Feed wakes for every message, whether it arrives while the reader
// waits, or while fn is still serving the one before (then its edge comes
// before the reader waits again, and must not be lost: a lost wake-up
// would leave the reader waiting until the deadline).
func TestFeedWakesForEveryArrival(t *testing.T) {
	a, b := pair(t)
	const rounds = 300
	next := make(chan int, 1)
	werr := make(chan error, 1)
	go func() {
		for i := range rounds {
			<-next
			if i%3 == 1 {
				time.Sleep(200 * time.Microsecond) // the reader is waiting by now
			}
			if _, err := a.Write([]byte{byte(i)}); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	b.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := NewReader(raw(t, b))
	buf := make([]byte, 64)
	var got []byte
	next <- 0
	n, err := r.Feed(buf, func(n int) bool {
		got = append(got, buf[:n]...)
		if len(got) == rounds {
			return false
		}
		next <- 0
		if len(got)%3 == 2 {
			// The next message arrives while this one is served.
			time.Sleep(300 * time.Microsecond)
		}
		return true
	})
	if err != nil {
		t.Fatalf("after %d of %d messages: %v", len(got), rounds, err)
	}
	if n != 1 || len(got) != rounds {
		t.Fatalf("last read %d, got %d bytes", n, len(got))
	}
	for i, c := range got {
		if c != byte(i) {
			t.Fatalf("byte %d is %d", i, c)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
}

// A message longer than Feed's buffer comes in full reads and the rest,
// read one after the other without waiting; what fn turns down is the
// caller's, and the socket keeps what follows; then EOF.
func TestFeedLongMessageThenEOF(t *testing.T) {
	a, b := pair(t)
	msg := make([]byte, 10<<10+17)
	for i := range msg {
		msg[i] = byte(i * 13)
	}
	if _, err := a.Write(msg); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := NewReader(raw(t, b))
	buf := make([]byte, 1<<10)
	var got []byte
	var sizes []int
	n, err := r.Feed(buf, func(n int) bool {
		got = append(got, buf[:n]...)
		sizes = append(sizes, n)
		return len(got) < len(msg)
	})
	if err != nil || n != 17 || !bytes.Equal(got, msg) {
		t.Fatalf("Feed = %d, %v; reads %v, %d bytes of %d", n, err, sizes, len(got), len(msg))
	}
	// Turned down: the next message stays for a plain Read.
	if _, err := a.Write([]byte("next")); err != nil {
		t.Fatal(err)
	}
	n, err = r.Feed(buf, func(int) bool { return false })
	if err != nil || string(buf[:n]) != "next" {
		t.Fatalf("Feed = %q, %v", buf[:n], err)
	}
	a.CloseWrite()
	calls := 0
	if _, err := r.Feed(buf, func(int) bool { calls++; return true }); err != io.EOF || calls != 0 {
		t.Fatalf("at the end: %v after %d calls, want io.EOF", err, calls)
	}
}

// Feed's wait ends at the deadline, and when the connection is closed.
func TestFeedDeadlineAndClose(t *testing.T) {
	a, b := pair(t)
	r := NewReader(raw(t, b))
	buf := make([]byte, 64)
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	calls := 0
	start := time.Now()
	_, err := r.Feed(buf, func(int) bool { calls++; return true })
	if !errors.Is(err, os.ErrDeadlineExceeded) || calls != 1 || time.Since(start) < 90*time.Millisecond {
		t.Fatalf("Feed = %v after %d calls and %v, want the deadline after one", err, calls, time.Since(start))
	}
	b.SetReadDeadline(time.Time{})
	go func() {
		time.Sleep(50 * time.Millisecond)
		b.Close()
	}()
	if _, err := r.Feed(buf, func(int) bool { return true }); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Feed of a closed connection = %v, want net.ErrClosed", err)
	}
}
