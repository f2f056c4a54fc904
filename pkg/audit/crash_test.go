package audit

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const crashDirEnv = "OXIOS_AUDIT_CRASH_DIR"

// TestHelperAppender is the child of TestCrashSIGKILL: it appends batches
// of random sizes in a loop, syncs most of them, and prints the last seq of
// every synced batch to stdout only after Sync returned (the daemon's "ok").
// Some batches are appended but not synced, so a kill often finds a tail
// that was written and never acknowledged, or a write half done.
func TestHelperAppender(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child process of TestCrashSIGKILL")
	}
	l, err := Open(dir, Options{SegmentBytes: 256 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	for i := 0; ; i++ {
		n := 1 + rng.IntN(64)
		batch := make([]*Entry, n)
		for j := range batch {
			e := entry(i*64 + j)
			e.Target += strings.Repeat("x", rng.IntN(3000)) // long lines tear more often
			batch[j] = e
		}
		if err := l.Append(batch); err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			os.Exit(4)
		}
		if rng.IntN(6) == 0 {
			continue // written, not synced: not acknowledged
		}
		if err := l.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, "sync:", err)
			os.Exit(5)
		}
		os.Stdout.WriteString(strconv.FormatUint(batch[n-1].Seq, 10) + "\n")
	}
}

// TestCrashSIGKILL kills a real appending process with SIGKILL at random
// moments, then checks that Open recovers a log that verifies and that holds
// every entry the child acknowledged.
func TestCrashSIGKILL(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	var acked uint64
	recovered := 0
	const rounds = 6
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAppender$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan uint64, 1<<16)
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if seq, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
					lines <- seq
				}
			}
		}()
		// Let it get going (the first acknowledgement), then kill it at a
		// random moment.
		select {
		case seq := <-lines:
			acked = max(acked, seq)
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child acknowledged nothing; stderr: %s", round, stderr.String())
		}
		time.Sleep(time.Duration(rng.IntN(150_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-readDone
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v, not killed; stderr: %s", round, err, stderr.String())
		}
		close(lines)
		for seq := range lines {
			acked = max(acked, seq)
		}

		l, err := Open(dir, Options{SegmentBytes: 256 << 10})
		if err != nil {
			t.Fatalf("round %d: Open after SIGKILL: %v", round, err)
		}
		if l.Recovered != "" {
			recovered++
		}
		head, _ := l.Head()
		t.Logf("round %d: acknowledged up to %d, head %d; recovered: %q", round, acked, head, l.Recovered)
		if head < acked {
			t.Fatalf("round %d: entry %d was acknowledged, the log ends at %d", round, acked, head)
		}
		next := uint64(1)
		err = l.Scan(1, func(e *Entry, _ []byte) error {
			if e.Seq != next {
				return fmt.Errorf("entry %d where %d was expected", e.Seq, next)
			}
			next++
			return nil
		})
		if err != nil || next-1 != head {
			t.Fatalf("round %d: Scan: %v (read to %d, head %d)", round, err, next-1, head)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(dir)
		if err != nil || !rep.OK || rep.HeadSeq != head {
			t.Fatalf("round %d: Verify after recovery: %+v %v", round, rep, err)
		}
	}
	t.Logf("%d of %d kills left a tail to recover", recovered, rounds)
}
