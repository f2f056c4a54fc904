package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
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

// bwrapArgv is bubblewrap around /bin/true with what a run gets: every
// namespace, the session and the capabilities gone, the system folders
// read-only, a /proc, a /dev and a /tmp of its own.
func bwrapArgv(bwrap string) []string {
	argv := []string{bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"} {
		if _, err := os.Lstat(d); err == nil {
			argv = append(argv, "--ro-bind", d, d)
		}
	}
	return append(argv, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/work", "--chdir", "/work", "/bin/true")
}

// benchBwrap measures ox-spawn -a A -- /bin/true, sandboxed, against
// bubblewrap (the Debian package bubblewrap) making the same
// namespaces around /bin/true, alternating in one run: one at a time,
// and 100 at once (the wall time of all of them). Our seccomp filter,
// Landlock, the workspace's filesystem, the run's socket and its audit
// entries are on top of bubblewrap's namespaces. rootless (not nil) is a
// daemon run by an ordinary user, measured the same way.
func benchBwrap(d, rootless *daemon, n int) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		fmt.Printf("%-46s %s\n", "sandbox vs bubblewrap", "skipped: bwrap not installed (apt-get install bubblewrap)")
		return
	}
	spawn := filepath.Join(*binDir, "ox-spawn")
	one := func(sock string) func() error {
		return func() error {
			cmd := exec.Command(spawn, "-a", "bench-box", "-n", "--socket", sock, "--", "/bin/true")
			cmd.Stdout = io.Discard
			return cmd.Run()
		}
	}
	bw := func() error { return exec.Command(bwrapArgv(bwrap)[0], bwrapArgv(bwrap)[1:]...).Run() }
	timed := func(f func() error) time.Duration {
		t := time.Now()
		check(f())
		return time.Since(t)
	}
	many := func(f func() error) time.Duration {
		t := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- f() }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			check(err)
		}
		return time.Since(t)
	}
	check(one(d.sock)())
	if rootless != nil {
		check(one(rootless.sock)())
	}
	ours, theirs, rl := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		ours[i] = timed(one(d.sock))
		theirs[i] = timed(bw)
		if rootless != nil {
			rl = append(rl, timed(one(rootless.sock)))
		}
	}
	const rounds = 5
	oursMany, theirsMany, rlMany := make([]time.Duration, rounds), make([]time.Duration, rounds), make([]time.Duration, 0, rounds)
	for i := 0; i < rounds; i++ {
		oursMany[i] = many(one(d.sock))
		theirsMany[i] = many(bw)
		if rootless != nil {
			rlMany = append(rlMany, many(one(rootless.sock)))
		}
	}
	mb := median(theirs)
	reportMs("baseline: bwrap --unshare-all ... /bin/true", mb, 0, "")
	reportMs("ox-spawn /bin/true sandboxed, as root", median(ours), mb, "<= 1.5x")
	if rootless != nil {
		reportMs("ox-spawn /bin/true sandboxed, rootless", median(rl), mb, "<= 1.5x")
	}
	mm := median(theirsMany)
	reportMs("baseline: 100 bwrap ... /bin/true at once", mm, 0, "")
	reportMs("100 ox-spawn /bin/true at once, as root", median(oursMany), mm, "<= 1.5x")
	if rootless != nil {
		reportMs("100 ox-spawn /bin/true at once, rootless", median(rlMany), mm, "<= 1.5x")
	}
}

// startRootless starts an oxiosd as nobody in a folder of its own below
// dir, when the bench runs as root; nil otherwise.
func startRootless(dir string) *daemon {
	if os.Geteuid() != 0 {
		return nil
	}
	const nobody = 65534
	own := filepath.Join(dir, "rootless")
	check(os.MkdirAll(own, 0o755))
	check(os.Chown(own, nobody, nobody))
	check(os.Chmod(dir, 0o755))
	sock := filepath.Join(own, "oxiosd.sock")
	cmd := exec.Command(filepath.Join(*binDir, "oxiosd"), "--config", "", "--no-mount", "--log-level", "warn",
		"--data", filepath.Join(own, "data"), "--socket", sock)
	cmd.Dir = own
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + own, "XDG_RUNTIME_DIR=" + own}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Stderr = os.Stderr
	start(cmd)
	return waitDaemon(cmd, sock)
}
