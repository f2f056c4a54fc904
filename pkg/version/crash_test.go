package version

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const crashDirEnv = "OXIOS_VERSION_CRASH_DIR"

// TestHelperCommitter is the child of TestCrashSIGKILL: it commits in a
// loop (small commits, large ones, tags, and pack merges, with a low pack
// limit) and prints each commit's hash once Commit has returned.
func TestHelperCommitter(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child process of TestCrashSIGKILL")
	}
	r, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	r.maxPacks = 5
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	for i := 0; ; i++ {
		tx, err := r.Begin()
		if err != nil {
			fmt.Fprintln(os.Stderr, "begin:", err)
			os.Exit(4)
		}
		n := 1 + rng.IntN(5)
		if rng.IntN(8) == 0 {
			n = 500 + rng.IntN(1500)
		}
		for range n {
			p := fmt.Sprintf("agents/a%d/state/d%d/k%d", rng.IntN(4), rng.IntN(30), rng.IntN(100))
			if rng.IntN(5) == 0 {
				tx.Delete(p)
			} else {
				tx.Put(p, fmt.Appendf(nil, "%d %d %s", i, rng.Int(), strings.Repeat("v", rng.IntN(400))))
			}
		}
		o := CommitOptions{Message: fmt.Sprint("commit ", i), Trailers: []Trailer{{"Oxios-Audit-Seq", fmt.Sprint(i)}}}
		if rng.IntN(10) == 0 {
			o.Tag = fmt.Sprintf("t%d-%d", os.Getpid(), i)
		}
		c, err := tx.Commit(o)
		if errors.Is(err, ErrNothingToCommit) {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "commit:", err)
			os.Exit(5)
		}
		os.Stdout.WriteString(c.Hash + "\n")
	}
}

// TestCrashSIGKILL kills a committing process at random moments and checks
// that the branch names the last acknowledged commit or the one after it,
// that git fsck --strict finds nothing wrong, and that Open goes on.
func TestCrashSIGKILL(t *testing.T) {
	needGit(t)
	dir := filepath.Join(t.TempDir(), "repo")
	rng := rand.New(rand.NewPCG(11, uint64(time.Now().UnixNano())))
	const rounds = 8
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCommitter$", "-test.count=1")
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
		lines := make(chan string, 1<<16)
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		var acked string
		select {
		case acked = <-lines:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child committed nothing; stderr: %s", round, stderr.String())
		}
		time.Sleep(time.Duration(rng.IntN(400_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-readDone
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: child was not killed; stderr: %s", round, stderr.String())
		}
		close(lines)
		n := 1
		for h := range lines {
			acked = h
			n++
		}

		head := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
		if head != acked {
			parent := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD^"))
			if parent != acked {
				t.Fatalf("round %d: HEAD %s is neither the acknowledged commit %s nor its child", round, head, acked)
			}
		}
		fsck(t, dir)
		tmp, _ := filepath.Glob(filepath.Join(dir, ".git/objects/pack/tmp_*"))
		r, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: Open after SIGKILL: %v", round, err)
		}
		fs, err := r.Files("HEAD", "")
		if err != nil {
			t.Fatal(err)
		}
		for p, h := range fs {
			if _, err := r.ReadBlob(h); err != nil {
				t.Fatalf("round %d: %s: %v", round, p, err)
			}
		}
		c := change(t, r, map[string][]byte{"after/crash": fmt.Appendf(nil, "%d", round)}, "after crash")
		if c.Parent != head {
			t.Fatalf("round %d: commit after reopen has parent %s, want %s", round, c.Parent, head)
		}
		r.Close()
		t.Logf("round %d: %d commits acknowledged; HEAD %s the acknowledged one; %d temp files left (Open removed them)",
			round, n, map[bool]string{true: "is", false: "follows"}[head == acked], len(tmp))
	}
	fsck(t, dir)
}
