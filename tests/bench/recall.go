package main

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// reportLatency prints a latency row in ms against the FTS5 anchor's
// (0: no anchor, the row says so).
func reportLatency(name string, fig, base float64, target string) {
	if base == 0 {
		fmt.Printf("%-46s %14.3f %14s  no anchor (-fts5; make bench builds it)\n", name, fig, "")
		return
	}
	fmt.Printf("%-46s %14.3f %14.3f %7.2fx  %s\n", name, fig, base, fig/base, target)
}

// benchRecall measures memory on real text, the same lines for oxiosd
// and for SQLite FTS5 (porter tokenizer, bm25) measured in the same run
// through a driver over SQLite's C library with prepared statements
// (tests/bench/fts5, see fts.go):
//
//   - bulk `ox-remember` of 100,000 lines from stdin, until it is answered
//     and until the daemon is idle (its files and indexes written, the CPU
//     of the whole drain), against one prepared INSERT a line in one
//     transaction, until its durable commit;
//   - mem.recall p50/p99 (top 10, with the memories' text), against the
//     same queries through one prepared SELECT (MATCH ... ORDER BY rank
//     LIMIT 10, text included), both end to end across a process boundary
//     (the socket; the anchor's pipes);
//   - with -recall-1m: p50 at 1,000,000 memories (target 10 ms), daemon
//     RSS (target 1.5 GiB) and restart to ready (target 3 s).
//
// The lines are the title and abstract lines of the CISI collection
// (-cisi), each joined with a later one so that the 100,000 lines are
// distinct; the queries, the first 4 keywords of its 112 queries. Without the
// collection a synthetic corpus stands in (Zipfian words), for both sides.
func benchRecall(dir string) {
	base := filepath.Join(dir, "recall")
	if *keep {
		// Out of dir, which main removes.
		var err error
		base, err = os.MkdirTemp("", "oxbench-recall")
		check(err)
		defer fmt.Printf("%-46s %s\n", "data directory left in", base)
	} else {
		defer os.RemoveAll(base)
	}
	check(os.MkdirAll(base, 0o700))
	d := startDaemonIn(base)
	defer func() { d.stop() }()
	g := newCorpus(1)
	const bulk = 100000
	lines, queries := realText(bulk)
	if lines == nil {
		fmt.Printf("%-46s %s\n", "(no CISI collection: synthetic text)", *cisi)
		for i := 0; i < bulk; i++ {
			lines = append(lines, g.doc())
		}
	}
	nextQuery := func() string {
		if queries == nil {
			return g.query()
		}
		q := queries[0]
		queries = append(queries[1:], q)
		return q
	}

	in := filepath.Join(base, "lines")
	check(os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	cmd := exec.Command(filepath.Join(*binDir, "ox-remember"), "-a", "bench")
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
	cmd.Stdin, _ = os.Open(in)
	cmd.Stderr = os.Stderr
	pid := d.cmd.Process.Pid
	t0, ticks0 := time.Now(), ticks(pid)
	check(cmd.Run())
	bulkRate := bulk / time.Since(t0).Seconds()
	clientCPU := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds() / bulk * 1e6
	// Until the daemon is idle: the answer comes once the memories are
	// durable in the journal; their files and indexes are written behind
	// it, and that work is part of what a memory costs. CPU a memory, of
	// the daemon's whole drain and the client together (the anchor is one
	// process): it moves much less than the rate with the machine's other
	// load. The daemon's ticks are USER_HZ (100 on Linux).
	idle := idleAt(d, 500*time.Millisecond, 5*time.Minute)
	idleRate := bulk / idle.Sub(t0).Seconds()
	daemonCPU := float64(ticks(pid)-ticks0) / 100 / bulk * 1e6
	fts := newFTS(base, lines)
	defer fts.close()
	const bulkRow = "remember 100k lines, until answered (/s)"
	const idleRow = "  until the daemon is idle (/s)"
	cpu := fmt.Sprintf("CPU/memory to idle %.1f us (oxiosd %.1f + ox-remember %.1f)", daemonCPU+clientCPU, daemonCPU, clientCPU)
	if fts == nil {
		fmt.Printf("%-46s %14.0f %14s  no anchor (-fts5; make bench builds it)\n", bulkRow, bulkRate, "")
		fmt.Printf("%-46s %14.0f %14s  %s\n", idleRow, idleRate, "", cpu)
	} else {
		report(bulkRow, bulkRate, fts.bulkRate, ">= 1.0x FTS5 insert+commit")
		report(idleRow, idleRate, fts.bulkRate, fmt.Sprintf(">= 1.0x FTS5  %s vs FTS5 %.1f us (<= 2x)", cpu, fts.bulkCPU/bulk*1e6))
	}

	c := dial(d.sock)
	// Three rounds of CISI's 112 queries: common words make some of them
	// slow for FTS5, and the run must end.
	qs := make([]string, 336)
	for i := range qs {
		qs[i] = nextQuery()
	}
	p50, p99 := recallLatency(c, qs)
	f50, f99 := fts.latency(qs)
	reportLatency("mem.recall p50 at 100k, k=10 (ms)", p50, f50, "<= 1.0x FTS5 bm25")
	reportLatency("mem.recall p99 at 100k, k=10 (ms)", p99, f99, "<= 1.0x FTS5 bm25")
	if !*recall1M {
		fmt.Printf("%-46s\n", "(1M figures: add -recall-1m)")
		c.Close()
		return
	}
	// Up to 1M through the socket, batches of 5000, 4 in flight.
	t0 = time.Now()
	var wg sync.WaitGroup
	batches := make(chan []proto.MemoryInput, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				_, err := c.MemRemember(context.Background(), proto.MemRememberArgs{Agent: "bench", Memories: b})
				check(err)
			}
		}()
	}
	for n := bulk; n < 1000000; n += 5000 {
		b := make([]proto.MemoryInput, 5000)
		for i := range b {
			b[i].Text = g.doc()
		}
		batches <- b
	}
	close(batches)
	wg.Wait()
	report("mem.remember to 1M, 5000/request, 4 in flight (/s)", 900000/time.Since(t0).Seconds(), 0, "")
	p50, p99 = recallLatency(c, qs)
	fmt.Printf("%-46s %14.3f %14s %8s  %s\n", "mem.recall p50 at 1M (ms)", p50, "", "", "<= 10 ms")
	fmt.Printf("%-46s %14.3f %14s %8s  %s\n", "mem.recall p99 at 1M (ms)", p99, "", "", "")
	rss := float64(rssKiB(d.cmd.Process.Pid)) / 1024
	fmt.Printf("%-46s %14.0f %14s %8s  %s\n", "daemon RSS at 1M memories (MiB)", rss, "", "", "<= 1.5 GiB")
	// Idle, oxiosd collects and returns free memory (quiesce.go): 5 to
	// 10 s after the last request, as its timer checks every 5 s.
	time.Sleep(12 * time.Second)
	rss = float64(rssKiB(d.cmd.Process.Pid)) / 1024
	fmt.Printf("%-46s %14.0f %14s %8s  %s\n", "  RSS at 1M, idle 12 s (MiB)", rss, "", "", "")
	c.Close()
	t0 = time.Now()
	d.stop()
	fmt.Printf("%-46s %14.2f %14s %8s  %s\n", "stop (saves the index) (s)", time.Since(t0).Seconds(), "", "", "")
	t0 = time.Now()
	d = startDaemonIn(base)
	c = dial(d.sock)
	_, _ = recallLatency(c, qs[:1])
	ready := time.Since(t0).Seconds()
	fmt.Printf("%-46s %14.2f %14s %8s  %s\n", "restart to ready at 1M, first recall (s)", ready, "", "", "<= 3 s")
	rss = float64(rssKiB(d.cmd.Process.Pid)) / 1024
	fmt.Printf("%-46s %14.0f %14s %8s  %s\n", "daemon RSS after restart at 1M (MiB)", rss, "", "", "<= 1.5 GiB")
	// After kill -9 a moment after 5,000 more memories: the indexes
	// from their checkpoints, the journal over them (issue 45: 8.5 s at
	// 100k, a rebuild from the files).
	b := make([]proto.MemoryInput, 5000)
	for i := range b {
		b[i].Text = g.doc()
	}
	_, err := c.MemRemember(context.Background(), proto.MemRememberArgs{Agent: "bench", Memories: b})
	check(err)
	c.Close()
	d.cmd.Process.Kill()
	d.cmd.Wait()
	t0 = time.Now()
	d = startDaemonIn(base)
	c = dial(d.sock)
	_, _ = recallLatency(c, qs[:1])
	crashed := time.Since(t0).Seconds()
	fmt.Printf("%-46s %14.2f %14.2f %7.2fx  %s\n", "restart after kill -9 at 1M, first recall (s)", crashed, ready, crashed/ready, "<= 3x the clean one")
	rss = float64(rssKiB(d.cmd.Process.Pid)) / 1024
	fmt.Printf("%-46s %14.0f %14s %8s  %s\n", "daemon RSS after that restart (MiB)", rss, "", "", "<= 1.5 GiB")
	c.Close()
}

func startDaemonIn(dir string) *daemon {
	sock := filepath.Join(dir, "oxiosd.sock")
	cmd := exec.Command(filepath.Join(*binDir, "oxiosd"), "--config", "", "--no-mount", "--log-level", "warn",
		"--data", filepath.Join(dir, "data"), "--socket", sock)
	cmd.Stderr = os.Stderr
	start(cmd)
	for i := 0; i < 3000; i++ {
		if c, err := client.Dial(context.Background(), sock); err == nil {
			c.Close()
			return &daemon{cmd: cmd, sock: sock}
		}
		time.Sleep(time.Millisecond)
	}
	fatal(fmt.Errorf("oxiosd did not start"))
	return nil
}

// settle waits until the daemon has used no CPU for half a second (at
// most a minute): its background writes are done.
// idleAt waits until the daemon has used no CPU for quiet (for at most
// limit) and returns when it last did, to the 50 ms of its polls.
func idleAt(d *daemon, quiet, limit time.Duration) time.Time {
	pid := d.cmd.Process.Pid
	last, moved := ticks(pid), time.Now()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if t := ticks(pid); t != last {
			last, moved = t, time.Now()
		} else if time.Since(moved) >= quiet {
			break
		}
	}
	return moved
}

func settle(d *daemon) {
	pid := d.cmd.Process.Pid
	last := ticks(pid)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		t := ticks(pid)
		if t == last {
			return
		}
		last = t
	}
}

// recallLatency runs the queries, one at a time, and returns p50 and p99
// in ms.
func recallLatency(c *client.Client, qs []string) (p50, p99 float64) {
	lat := make([]float64, len(qs))
	for i, q := range qs {
		t0 := time.Now()
		err := c.MemRecall(context.Background(), proto.MemRecallArgs{Agent: "bench", Query: q, K: 10}, func(proto.MemoryRecord) error { return nil })
		check(err)
		lat[i] = float64(time.Since(t0).Microseconds()) / 1000
	}
	return percentiles(lat)
}

func percentiles(lat []float64) (p50, p99 float64) {
	sort.Float64s(lat)
	n := len(lat)
	return lat[n/2], lat[min(n-1, n*99/100)]
}

// corpus draws words from a Zipfian vocabulary of 20,000 made-up words.
type corpus struct {
	r     *rand.Rand
	z     *rand.Zipf
	vocab []string
}

func newCorpus(seed int64) *corpus {
	r := rand.New(rand.NewSource(seed))
	g := &corpus{r: r, z: rand.NewZipf(r, 1.07, 2, 19999)}
	seen := map[string]bool{}
	const letters = "abcdefghijklmnoprstuvwy"
	for len(g.vocab) < 20000 {
		n := 3 + r.Intn(7)
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[r.Intn(len(letters))]
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			g.vocab = append(g.vocab, w)
		}
	}
	return g
}

func (g *corpus) word() string { return g.vocab[g.z.Uint64()] }

func (g *corpus) doc() string {
	n := 20 + g.r.Intn(21)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = g.word()
	}
	return strings.Join(ws, " ")
}

// query is 2-3 words, drawn from the vocabulary's middle (uniformly over
// its ranks on a log scale) so queries mix common and rare words.
func (g *corpus) query() string {
	n := 2 + g.r.Intn(2)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = g.vocab[int(math.Exp(g.r.Float64()*math.Log(20000)))-1]
	}
	return strings.Join(ws, " ")
}
