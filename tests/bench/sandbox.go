package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"time"
)

// benchSandbox measures what the sandbox of issue 17 adds to a run:
// ox-spawn -a A -- /bin/true end to end for an agent in the full sandbox
// and for one whose policy says isolation = "none", interleaved so that
// the machine's load falls on both alike, against unshare(1) making the
// same namespaces around /bin/true in the same run (the bare cost of
// namespaces).
func benchSandbox(d *daemon, n int) {
	c := dial(d.sock)
	defer c.Close()
	ctx := context.Background()
	_, err := c.PolicySet(ctx, "bench-open", "[sandbox]\nisolation = \"none\"\n")
	check(err)
	spawn := filepath.Join(*binDir, "ox-spawn")
	run := func(agent string) time.Duration {
		cmd := exec.Command(spawn, "-a", agent, "-n", "--socket", d.sock, "--", "/bin/true")
		cmd.Stdout = io.Discard
		t := time.Now()
		check(cmd.Run())
		return time.Since(t)
	}
	run("bench-box") // creates the agent
	boxed, open, bare, ns := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n)
	for i := 0; i < n; i++ {
		boxed[i] = run("bench-box")
		open[i] = run("bench-open")
		t := time.Now()
		check(exec.Command("/bin/true").Run())
		bare[i] = time.Since(t)
		t = time.Now()
		check(exec.Command("unshare", "-U", "-m", "-p", "-n", "--fork", "/bin/true").Run())
		ns[i] = time.Since(t)
	}
	mb, mn, mo, mx := median(bare), median(ns), median(open), median(boxed)
	reportMs("baseline: fork/exec /bin/true (median)", mb, 0, "")
	reportMs("baseline: unshare -U -m -p -n --fork /bin/true", mn, mb, "")
	reportMs("ox-spawn /bin/true, isolation none (median)", mo, 0, "")
	reportMs("ox-spawn /bin/true, sandboxed (median)", mx, mo, "")
	reportMs("sandbox overhead per run (median)", mx-mo, 0, "<= 3 ms")
}
