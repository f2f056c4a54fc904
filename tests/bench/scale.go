package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

var (
	scaleSizes   = flag.String("scale", "1k,10k,100k", "scale: the key counts of the scale rows, comma-separated (1M takes a few minutes more: -scale 1k,10k,100k,1M)")
	scaleAgainst = flag.String("scale-against", "", "scale: also run each size with the binaries of this `DIR` (another build), alternating, and print both")
	scaleAged    = flag.String("scale-aged", "", "scale: also run each size on a data directory aged first: this many keys (1M) saved and deleted by another agent, their files written and removed, before the fill (rows marked \"aged\", their ratio to the fresh run of the same size)")
)

// benchScale measures one agent's state as it grows: for each size, a
// fresh oxiosd (its own data directory, so no row inherits another's
// index or repository), filled with that many keys of 100 bytes in
// folders of 1,000 (8 connections, 64 saves in flight on each), then
//
//   - the fill rate (target at 1M: at least 50k/s);
//   - save and load p50/p99, one connection, one call at a time, on keys
//     drawn at random from the whole agent;
//   - the time `ox-state ls` takes to print its first record (target: at
//     once at any size);
//   - the first commit of every key, then a commit of 10 changed keys
//     through the `ox-commit` command, median of 5 (target: at 1M within
//     2x of the same at 10k), and the same commit as a call on an open
//     connection (without the command's start);
//   - the daemon's RSS after the fill and after the commits, over the
//     number of keys (target: a few hundred bytes a key).
//
// The smallest size is every row's anchor: each row prints its ratio to
// the same row at the first size, measured in the same run.
func benchScale(dir string) {
	var sizes []int
	for _, s := range strings.Split(*scaleSizes, ",") {
		n, err := parseCount(strings.TrimSpace(s))
		check(err)
		sizes = append(sizes, n)
	}
	fmt.Printf("\nscale: one agent's state at %s keys (100 B values, folders of 1,000)\n", *scaleSizes)
	if *scaleAgainst != "" {
		fmt.Printf("each size also with %s (rows marked \"other\"), the two in turns; the ratio column of this build's rows is to the other's\n", *scaleAgainst)
	}
	aged := 0
	if *scaleAged != "" {
		var err error
		aged, err = parseCount(*scaleAged)
		check(err)
		fmt.Printf("each size also on a data directory aged by %s keys saved and deleted first (rows marked \"aged\"; their ratio is to the fresh run)\n", *scaleAged)
	}
	var anchor *scaleRow
	for i, n := range sizes {
		// Each daemon's data is removed once its rows are printed: a
		// million files take minutes to remove.
		var bases []string
		measure := func(bin, name string) scaleRow {
			base := filepath.Join(dir, name+"-"+countName(n))
			bases = append(bases, base)
			return scaleOnce(bin, base, n)
		}
		if *scaleAgainst == "" {
			row := measure(*binDir, "scale")
			if anchor == nil {
				anchor = &row
			}
			row.print("", anchor)
			if aged > 0 {
				base := filepath.Join(dir, "scale-aged-"+countName(n))
				bases = append(bases, base)
				a := scaleOnceAged(*binDir, base, n, aged)
				a.print(" aged", &row)
			}
		} else {
			var a, b scaleRow
			if i%2 == 0 {
				b = measure(*scaleAgainst, "scale-other")
				a = measure(*binDir, "scale")
			} else {
				a = measure(*binDir, "scale")
				b = measure(*scaleAgainst, "scale-other")
			}
			b.print(" other", nil)
			a.print("", &b)
		}
		for _, base := range bases {
			check(os.RemoveAll(base))
		}
	}
}

// parseCount reads 1k, 10k, 1M, or a plain number.
func parseCount(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1000, s[:len(s)-1]
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult, s = 1000000, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("-scale: %q is not a count of keys (1k, 10k, 1M)", s)
	}
	return n * mult, nil
}

type scaleRow struct {
	n                          int
	fill                       float64 // keys/s
	saveP50, saveP99           time.Duration
	loadP50, loadP99           time.Duration
	lsFirst, lsAgain, lsCall   time.Duration
	firstCommit, commit10      time.Duration
	call10                     time.Duration // the same commit as a call on an open connection
	rssFill, rssCommit, rssEnd float64       // bytes a key
	rssIdle                    float64       // bytes a key, once the daemon settled
	restartClean, restartCrash time.Duration // start to ready
}

// print prints r's rows, each with the same row of a (the anchor: the
// first size, or the other build at this size) and their ratio; a nil
// anchor, or r itself, prints the figures alone.
func (r *scaleRow) print(tag string, a *scaleRow) {
	name := fmt.Sprintf("scale %s%s:", countName(r.n), tag)
	alone := a == nil || a == r
	if alone {
		a = &scaleRow{}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	row := func(what string, f, b float64, target string) {
		if alone || b == 0 {
			fmt.Printf("%-46s %14.2f %14s %8s  %s\n", name+" "+what, f, "", "", target)
			return
		}
		fmt.Printf("%-46s %14.2f %14.2f %7.2fx  %s\n", name+" "+what, f, b, f/b, target)
	}
	row("fill (keys/s)", r.fill, a.fill, ">= 50k/s at 1M")
	row("save p50 (ms)", ms(r.saveP50), ms(a.saveP50), "")
	row("save p99 (ms)", ms(r.saveP99), ms(a.saveP99), "")
	row("load p50 (ms)", ms(r.loadP50), ms(a.loadP50), "")
	row("load p99 (ms)", ms(r.loadP99), ms(a.loadP99), "")
	row("ox-state ls, first record (ms)", ms(r.lsFirst), ms(a.lsFirst), "at once")
	row("  again, after 10 new keys (ms)", ms(r.lsAgain), ms(a.lsAgain), "at once")
	row("  again, as a call (ms)", ms(r.lsCall), ms(a.lsCall), "")
	row("first commit of all (ms)", ms(r.firstCommit), ms(a.firstCommit), "")
	row("ox-commit of 10 keys, median (ms)", ms(r.commit10), ms(a.commit10), "<= 2x of 10k's")
	row("  the same as a call, median (ms)", ms(r.call10), ms(a.call10), "")
	row("RSS after fill (B/key)", r.rssFill, a.rssFill, "a few hundred")
	row("RSS after first commit (B/key)", r.rssCommit, a.rssCommit, "")
	row("RSS after the 10-key commits (B/key)", r.rssEnd, a.rssEnd, "a few hundred")
	row("RSS idle 12 s after (B/key)", r.rssIdle, a.rssIdle, "a commit's memory returned")
	row("restart after a clean stop (ms)", ms(r.restartClean), ms(a.restartClean), "")
	row("restart after kill -9 (ms)", ms(r.restartCrash), ms(a.restartCrash), "<= 3x the clean one")
}

func countName(n int) string {
	switch {
	case n%1000000 == 0:
		return fmt.Sprintf("%dM", n/1000000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

func scaleKey(i int) string { return fmt.Sprintf("d%04d/k%07d", i/1000, i) }

// scaleOnce fills a fresh daemon of bin in base with n keys and
// measures it.
func scaleOnce(bin, base string, n int) scaleRow { return scaleOnceAged(bin, base, n, 0) }

// scaleOnceAged is scaleOnce on a data directory aged first by aged keys
// saved and deleted by another agent, the daemon idle after each (their
// files written, then removed): a file system that has allocated and
// freed that many inodes, as one does after months of use, allocates
// new ones more slowly than a fresh one (issue 51).
func scaleOnceAged(bin, base string, n, aged int) scaleRow {
	check(os.MkdirAll(base, 0o755))
	d := startDaemonFrom(bin, base)
	defer func() { d.stop() }()
	if aged > 0 {
		ageData(d, aged)
	}
	const agent = "scale"
	ctx := context.Background()
	row := scaleRow{n: n}
	val := []byte(strings.Repeat("v", 100))

	// Fill: 8 connections, each 64 saves in flight (client.Pipeline).
	t0 := time.Now()
	pipelined(d.sock, n, func(p *client.Pipeline, i int) *client.Pending { return p.StateSave(agent, scaleKey(i), val) })
	row.fill = float64(n) / time.Since(t0).Seconds()
	pid := d.cmd.Process.Pid
	perKey := func() float64 { return float64(rssKiB(pid)) * 1024 / float64(n) }
	row.rssFill = perKey()

	c := dial(d.sock)
	defer c.Close()
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	var saves, loads []time.Duration
	for i := range 2000 {
		k := scaleKey(rng.IntN(n))
		t := time.Now()
		if i%2 == 0 {
			_, err := c.StateSave(ctx, agent, k, val)
			check(err)
			saves = append(saves, time.Since(t))
		} else {
			_, _, err := c.StateLoad(ctx, agent, k)
			check(err)
			loads = append(loads, time.Since(t))
		}
	}
	row.saveP50, row.saveP99 = pct(saves, 50), pct(saves, 99)
	row.loadP50, row.loadP99 = pct(loads, 50), pct(loads, 99)
	row.lsFirst = firstLine(d.sock, filepath.Join(bin, "ox-state"), "ls", "-a", agent)
	for i := range 10 {
		_, err := c.StateSave(ctx, agent, fmt.Sprintf("new/k%d", i), val)
		check(err)
	}
	row.lsAgain = firstLine(d.sock, filepath.Join(bin, "ox-state"), "ls", "-a", agent)
	// The same without the command's start: the first record of
	// state.list on a connection (the client reads the rest).
	lc := dial(d.sock)
	t0 = time.Now()
	check(lc.StateList(ctx, agent, "", func(proto.StateRecord) error {
		if row.lsCall == 0 {
			row.lsCall = time.Since(t0)
		}
		return nil
	}))
	lc.Close()

	t0 = time.Now()
	_, err := c.Commit(ctx, proto.CommitArgs{Agent: agent, Message: "scale: all keys"})
	check(err)
	row.firstCommit = time.Since(t0)
	row.rssCommit = perKey()
	var commits []time.Duration
	for round := range 5 {
		for i := range 10 {
			_, err := c.StateSave(ctx, agent, scaleKey((i*n/10+round*7)%n), fmt.Appendf(nil, "round %d", round))
			check(err)
		}
		cmd := exec.Command(filepath.Join(bin, "ox-commit"), "-a", agent, "-m", fmt.Sprint("scale round ", round))
		cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
		t := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			fatal(fmt.Errorf("ox-commit: %v\n%s", err, out))
		}
		commits = append(commits, time.Since(t))
	}
	row.commit10 = median(commits)
	// The same commits without the command's start (a Go process, a
	// connection): what the daemon takes.
	var calls []time.Duration
	for round := range 5 {
		for i := range 10 {
			_, err := c.StateSave(ctx, agent, scaleKey((i*n/10+round*11+3)%n), fmt.Appendf(nil, "call round %d", round))
			check(err)
		}
		t := time.Now()
		_, err := c.Commit(ctx, proto.CommitArgs{Agent: agent, Message: fmt.Sprint("scale call ", round)})
		check(err)
		calls = append(calls, time.Since(t))
	}
	row.call10 = median(calls)
	row.rssEnd = perKey()
	// oxiosd settles (a collection, memory returned) once 5 s pass
	// without a request, which its timer sees within 10 s.
	time.Sleep(12 * time.Second)
	row.rssIdle = perKey()
	c.Close()

	// Restarts: after a clean stop (the index from its key snapshot),
	// then after kill -9 a moment after 10 saves (what the index's
	// checkpoint and the journal give back).
	d.stop()
	t0 = time.Now()
	d = startDaemonWait(bin, base, 10*time.Minute)
	row.restartClean = time.Since(t0)
	c = dial(d.sock)
	for i := range 10 {
		_, err := c.StateSave(ctx, agent, scaleKey((i*n/10+5)%n), []byte("before the crash"))
		check(err)
	}
	c.Close()
	d.cmd.Process.Kill()
	d.cmd.Wait()
	t0 = time.Now()
	d = startDaemonWait(bin, base, 10*time.Minute)
	row.restartCrash = time.Since(t0)
	c = dial(d.sock)
	defer c.Close()
	if v, _, err := c.StateLoad(ctx, agent, scaleKey(5%n)); err != nil || string(v) != "before the crash" {
		fatal(fmt.Errorf("scale: after kill -9 and restart, %s holds %q (%v), not the acknowledged save", scaleKey(5%n), v, err))
	}
	return row
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// firstLine runs a command against the daemon at sock and returns how
// long it took to print its first line; the rest is read and dropped.
func firstLine(sock, prog string, args ...string) time.Duration {
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+sock)
	out, err := cmd.StdoutPipe()
	check(err)
	t := time.Now()
	start(cmd)
	buf := make([]byte, 64<<10)
	var first time.Duration
	for {
		m, err := out.Read(buf)
		if first == 0 && slices.Contains(buf[:m], '\n') {
			first = time.Since(t)
		}
		if err != nil {
			break
		}
	}
	check(cmd.Wait())
	if first == 0 {
		fatal(fmt.Errorf("%s %v printed no line", prog, args))
	}
	return first
}

// ageData saves n keys of 100 bytes in the agent "ager", waits for the
// daemon to write their files, deletes them all and waits for it to
// remove the files.
func ageData(d *daemon, n int) {
	val := []byte(strings.Repeat("a", 100))
	pipelined(d.sock, n, func(p *client.Pipeline, i int) *client.Pending { return p.StateSave("ager", scaleKey(i), val) })
	idleAt(d, time.Second, 30*time.Minute)
	pipelined(d.sock, n, func(p *client.Pipeline, i int) *client.Pending { return p.StateDelete("ager", scaleKey(i)) })
	idleAt(d, time.Second, 30*time.Minute)
}

// pipelined makes the n calls op(p, 0..n-1) on 8 connections, 64 in
// flight on each (client.Pipeline), and fails on the first error.
func pipelined(sock string, n int, op func(p *client.Pipeline, i int) *client.Pending) {
	next := make(chan int, 64)
	go func() {
		for i := 0; i < n; i += 64 {
			next <- i
		}
		close(next)
	}()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(sock)
			defer c.Close()
			p := c.Pipeline()
			var ps []*client.Pending
			for lo := range next {
				ps = ps[:0]
				for i := lo; i < min(lo+64, n); i++ {
					ps = append(ps, op(p, i))
				}
				check(p.Send())
				for _, pd := range ps {
					_, _, err := pd.Value(context.Background())
					check(err)
				}
			}
		}()
	}
	wg.Wait()
}
