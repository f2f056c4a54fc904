package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// benchWork measures a run on a host folder (ox-spawn --work, issue 48):
// the start of a run on a tree of 10,000 files against the same run
// without --work, interleaved; and ox-work diff of a run that changed 100
// files against git diff --no-index of the same 100 files before and
// after, in the same run.
func benchWork(dir string, d *daemon, n int) {
	tree := filepath.Join(dir, "worktree")
	for i := 0; i < 100; i++ {
		sub := filepath.Join(tree, fmt.Sprintf("d%02d", i))
		check(os.MkdirAll(sub, 0o755))
		for j := 0; j < 100; j++ {
			check(os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d.txt", j)), []byte(strings.Repeat(fmt.Sprintf("line %d of file %d\n", j, i), 20)), 0o644))
		}
	}
	c := dial(d.sock)
	defer c.Close()
	_, err := c.PolicySet(context.Background(), "bench-work", "[work]\nallow = [\""+tree+"\"]\n")
	check(err)
	spawn := filepath.Join(*binDir, "ox-spawn")
	run := func(args ...string) time.Duration {
		cmd := exec.Command(spawn, append([]string{"-a", "bench-work", "-n", "--socket", d.sock}, args...)...)
		cmd.Stdout = io.Discard
		t := time.Now()
		check(cmd.Run())
		return time.Since(t)
	}
	run("--", "/bin/true")
	// The start: ox-spawn -d returns once the run has started (its
	// sandbox built, the overlay mounted); then the whole run, to its
	// exit, which with --work reads what it changed.
	plain, work := make([]time.Duration, n), make([]time.Duration, n)
	plainAll, workAll := make([]time.Duration, n), make([]time.Duration, n)
	for i := 0; i < n; i++ {
		// The order alternates: what a run leaves to finish after its
		// start (its audit entry, its record), the next start shares
		// the machine with, and neither kind always follows the other.
		a := func() { plain[i] = run("-d", "--", "/bin/sleep", "0.2") }
		b := func() { work[i] = run("-d", "--work", tree, "--", "/bin/sleep", "0.2") }
		if i%2 == 1 {
			a, b = b, a
		}
		a()
		b()
		a = func() { plainAll[i] = run("--", "/bin/true") }
		b = func() { workAll[i] = run("--work", tree, "--", "/bin/true") }
		if i%2 == 1 {
			a, b = b, a
		}
		a()
		b()
	}
	mp, mw := median(plain), median(work)
	reportMs("ox-spawn -d (start) (median)", mp, 0, "")
	reportMs("ox-spawn -d --work (10k files) (median)", mw, mp, "")
	// Each start with --work against the one without beside it: on a
	// loaded machine the two medians each move by more than the
	// difference sought, while the pair's two starts share the load.
	diff := make([]time.Duration, n)
	for i := range diff {
		diff[i] = work[i] - plain[i]
	}
	reportMs("--work start overhead per run (median of pairs)", median(diff), 0, "< 5 ms")
	reportMs("ox-spawn --work /bin/true, start to exit", median(workAll), median(plainAll), "")

	// A run that changes 100 files, then its diff.
	cmd := exec.Command(spawn, "-a", "bench-work", "-n", "-d", "--socket", d.sock, "--work", tree, "--",
		"/bin/sh", "-c", "for f in d00/*.txt; do echo changed >> $f; done")
	out, err := cmd.Output()
	check(err)
	id := jsonField(out, "id")
	wait := exec.Command(filepath.Join(*binDir, "ox-wait"), "--socket", d.sock, id)
	wait.Stdout = io.Discard
	check(wait.Run())
	a, b := filepath.Join(dir, "wdiff", "a"), filepath.Join(dir, "wdiff", "b")
	check(os.MkdirAll(a, 0o755))
	check(os.MkdirAll(b, 0o755))
	files, _ := filepath.Glob(filepath.Join(tree, "d00", "*.txt"))
	for _, f := range files {
		old, err := os.ReadFile(f)
		check(err)
		check(os.WriteFile(filepath.Join(a, filepath.Base(f)), old, 0o644))
		check(os.WriteFile(filepath.Join(b, filepath.Base(f)), append(old, "changed\n"...), 0o644))
	}
	oxwork := filepath.Join(*binDir, "ox-work")
	timed := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Dir = filepath.Join(dir, "wdiff")
		cmd.Stdout = io.Discard
		t := time.Now()
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasSuffix(name, "git") {
			check(err)
		}
		return time.Since(t)
	}
	ours, git := make([]time.Duration, n), make([]time.Duration, n)
	for i := 0; i < n; i++ {
		ours[i] = timed(oxwork, "--socket", d.sock, "diff", id)
		git[i] = timed("git", "diff", "--no-index", "--binary", "a", "b")
	}
	reportMs("ox-work diff, 100 files changed (median)", median(ours), median(git), "<= 2x git diff --no-index")
}

// jsonField is the string field name of the JSON object in b.
func jsonField(b []byte, name string) string {
	s := string(b)
	i := strings.Index(s, `"`+name+`":"`)
	if i < 0 {
		fatal(fmt.Errorf("no %q in %s", name, b))
	}
	s = s[i+len(name)+4:]
	return s[:strings.IndexByte(s, '"')]
}
