// Command bench measures oxiosd against baselines taken in the same run and
// prints figures and ratios. It asserts nothing: machines are noisy, so
// targets are read by people, not enforced by tests. Run it with
// `make bench` (or `go run ./tests/bench -bin bin`).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/client"
)

var (
	binDir     = flag.String("bin", "bin", "directory with the oxiosd binary")
	dur        = flag.Duration("d", 2*time.Second, "duration of each throughput measurement")
	idleFor    = flag.Duration("idle", 150*time.Second, "how long to watch an idle daemon's CPU (0 to skip)")
	only       = flag.String("only", "", "run only benchmarks whose name contains this")
	rounds     = flag.Int("rounds", 3, "rounds of each row measured against a peer (Redis): the median is reported")
	echoSrv    = flag.String("echo-server", "", "internal: serve a raw JSON echo on this socket")
	keep       = flag.Bool("keep", false, "recall: leave the data directory of the recall benchmark (its path is printed), to time restarts by hand")
	cisi       = flag.String("cisi", "../shared/data/ir/cisi", "recall: the CISI collection, whose text the recall rows use")
	forkRounds = flag.Int("fork-rounds", 21, "fork: rounds of a fork and a commit, each the other's baseline")
	recall1M   = flag.Bool("recall-1m", true, "recall: also measure at 1M memories (about a minute more)")
)

func main() {
	flag.Parse()
	if *echoSrv != "" {
		serveEcho(*echoSrv)
		return
	}
	dir, err := os.MkdirTemp("", "oxbench")
	check(err)
	defer os.RemoveAll(dir)
	d := startDaemon(dir)
	defer d.stop()

	fmt.Printf("oxiosd benchmarks (%s each; GOMAXPROCS of the machine: %d cores)\n\n", *dur, numCPU())
	fmt.Printf("%-46s %14s %14s %8s  %s\n", "benchmark", "figure", "baseline", "ratio", "target")
	echo := startEcho(dir)
	defer echo.Process.Kill()

	if run("echo") {
		r := rate(func(stop *atomic.Bool) int64 { return echoLoop(filepath.Join(dir, "echo.sock"), stop) })
		report("raw JSON echo, 1 conn, sequential (round trips/s)", r, 0, "transport limit")
	}
	c := dial(d.sock)
	ctx := context.Background()
	_, err = c.StateSave(ctx, "bench", "v100", []byte(strings.Repeat("x", 100)))
	check(err)

	if run("load") || run("save") {
		peerRows(dir, d, c)
	}
	c.Close()
	if run("audit") {
		benchAudit(dir)
	}
	if run("commit") {
		benchCommit(dir, d.sock)
	}
	if run("fork") {
		benchFork(d.sock)
	}
	if run("scale") {
		benchScale(dir)
	}
	if run("forget") {
		benchForget(d)
	}
	if run("remove") {
		benchRemove(d)
	}
	if run("fuse") {
		benchFUSE(dir)
	}
	if run("recall") {
		benchRecall(dir)
	}
	if run("events") {
		benchEvents(d)
	}
	if run("spawn") {
		benchSpawn(d, 200)
	}
	if run("sandbox") {
		benchSandbox(d, 100)
		rl := startRootless(dir)
		benchBwrap(d, rl, 100)
		if rl != nil {
			rl.cmd.Process.Kill()
			rl.cmd.Wait()
		}
	}
	if run("work") {
		benchWork(dir, d, 50)
	}
	if run("agent") {
		benchAgent(dir)
	}
	if run("authorize") {
		benchAuthorize(dir)
	}
	if run("wasm") {
		benchWasm(dir, 200)
	}
	if run("schedules") {
		benchSchedules(d, 1000)
	}
	if run("fleet") {
		benchFleet(dir, 50)
	}
	// The hostile and idle rows measure a daemon as an operator starts
	// it, not the one above, which holds what the earlier rows left (the
	// fork row's 21 forks of 10k keys: 160 MiB of index, against targets
	// of 200 MiB under attack and 30 MiB idle).
	hostile, idling := run("hostile"), run("idle") && *idleFor > 0
	if hostile || idling {
		fresh := filepath.Join(dir, "fresh")
		check(os.MkdirAll(fresh, 0o755))
		fd := startDaemon(fresh)
		defer fd.stop()
		if hostile {
			benchHostile(fd)
		}
		if idling {
			idle(fd, *idleFor)
			idleRuns(fd, *idleFor)
		}
	}
}

func run(name string) bool { return *only == "" || strings.Contains(name, *only) }

func report(name string, fig, base float64, target string) {
	ratio, b := "", ""
	if base > 0 {
		ratio = fmt.Sprintf("%.2fx", fig/base)
		b = fmt.Sprintf("%.0f", base)
	}
	fmt.Printf("%-46s %14.0f %14s %8s  %s\n", name, fig, b, ratio, target)
}

// rate runs fn for the configured duration and returns operations/s.
func rate(fn func(stop *atomic.Bool) int64) float64 { return parallel(1, fn) }

func parallel(n int, fn func(stop *atomic.Bool) int64) float64 {
	var stop atomic.Bool
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); total.Add(fn(&stop)) }()
	}
	time.Sleep(*dur)
	stop.Store(true)
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

func loads(c *client.Client, stop *atomic.Bool) int64 {
	var n int64
	for !stop.Load() {
		if _, _, err := c.StateLoad(context.Background(), "bench", "v100"); err != nil {
			fatal(err)
		}
		n++
	}
	return n
}

// pipeLoads loads in runs of depth calls sent together (client.Pipeline),
// as redis-benchmark -P does.
func pipeLoads(c *client.Client, depth int, stop *atomic.Bool) int64 {
	var n int64
	p := c.Pipeline()
	ps := make([]*client.Pending, depth)
	for !stop.Load() {
		for i := range ps {
			ps[i] = p.StateLoad("bench", "v100")
		}
		if err := p.Send(); err != nil {
			fatal(err)
		}
		for _, pd := range ps {
			if _, _, err := pd.Value(context.Background()); err != nil {
				fatal(err)
			}
		}
		n += int64(depth)
	}
	return n
}

func saves(c *client.Client, prefix string, keys int, stop *atomic.Bool) int64 {
	var n int64
	v := []byte(strings.Repeat("s", 100))
	for !stop.Load() {
		key := fmt.Sprintf("%s/k%d", prefix, n%int64(keys))
		if _, err := c.StateSave(context.Background(), "bench", key, v); err != nil {
			fatal(err)
		}
		n++
	}
	return n
}

// fsyncRate is the disk's own limit: sequential 200-byte appends, each
// made durable, on the same file system as the data.
func fsyncRate(dir string) float64 {
	f, err := os.Create(filepath.Join(dir, "fsync-probe"))
	check(err)
	defer f.Close()
	buf := make([]byte, 200)
	return rate(func(stop *atomic.Bool) int64 {
		var n int64
		for !stop.Load() {
			f.Write(buf)
			syscall.Fdatasync(int(f.Fd()))
			n++
		}
		return n
	})
}

// The echo baseline: a separate process that writes every line back, and a
// client that sends a request line of the same shape as a load and reads
// the reply line. No decoding on either side: the transport's limit.
func startEcho(dir string) *exec.Cmd {
	sock := filepath.Join(dir, "echo.sock")
	self, err := os.Executable()
	check(err)
	cmd := exec.Command(self, "-echo-server", sock)
	cmd.Stderr = os.Stderr
	start(cmd)
	for i := 0; i < 500; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return cmd
		}
		time.Sleep(10 * time.Millisecond)
	}
	fatal(fmt.Errorf("echo server did not start"))
	return nil
}

func serveEcho(sock string) {
	ln, err := net.Listen("unix", sock)
	check(err)
	for {
		c, err := ln.Accept()
		check(err)
		go func() {
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					c.Close()
					return
				}
				c.Write(line)
			}
		}()
	}
}

func echoLoop(sock string, stop *atomic.Bool) int64 {
	c, err := net.Dial("unix", sock)
	check(err)
	defer c.Close()
	r := bufio.NewReader(c)
	line := []byte(`{"id":1,"op":"state.load","args":{"agent":"bench","key":"v100"}}` + "\n")
	var n int64
	for !stop.Load() {
		c.Write(line)
		if _, err := r.ReadSlice('\n'); err != nil {
			fatal(err)
		}
		n++
	}
	return n
}

type daemon struct {
	cmd  *exec.Cmd
	sock string
}

func startDaemon(dir string) *daemon { return startDaemonFrom(*binDir, dir) }

// startDaemonFrom starts the oxiosd of bin with its data in dir.
func startDaemonFrom(bin, dir string) *daemon { return startDaemonWait(bin, dir, 5*time.Second) }

// startDaemonWait starts oxiosd of bin on dir and waits at most wait for
// it to answer.
func startDaemonWait(bin, dir string, wait time.Duration) *daemon {
	sock := filepath.Join(dir, "oxiosd.sock")
	cmd := exec.Command(filepath.Join(bin, "oxiosd"), "--config", "", "--no-mount", "--log-level", "warn",
		"--data", filepath.Join(dir, "data"), "--socket", sock)
	cmd.Stderr = os.Stderr
	start(cmd)
	return waitDaemonFor(cmd, sock, wait)
}

// waitDaemon waits until a started oxiosd answers on sock.
func waitDaemon(cmd *exec.Cmd, sock string) *daemon { return waitDaemonFor(cmd, sock, 5*time.Second) }

func waitDaemonFor(cmd *exec.Cmd, sock string, wait time.Duration) *daemon {
	for t0 := time.Now(); time.Since(t0) < wait; {
		if c, err := client.Dial(context.Background(), sock); err == nil {
			c.Close()
			return &daemon{cmd: cmd, sock: sock}
		}
		time.Sleep(5 * time.Millisecond)
	}
	fatal(fmt.Errorf("oxiosd did not start in %s", wait))
	return nil
}

func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
}

func dial(sock string) *client.Client {
	c, err := client.Dial(context.Background(), sock)
	check(err)
	return c
}

// idle watches the daemon with one connection open and nothing to do: CPU
// ticks (utime+stime from /proc/PID/stat) and RSS.
func idle(d *daemon, span time.Duration) {
	c := dial(d.sock)
	defer c.Close()
	// oxiosd settles (one collection, memory returned) 5 s after the last
	// request; the window starts after that.
	time.Sleep(8 * time.Second)
	pid := d.cmd.Process.Pid
	t0 := ticks(pid)
	fmt.Printf("\nwatching idle oxiosd (pid %d, 1 connection open) for %s...\n", pid, span)
	time.Sleep(span)
	t1 := ticks(pid)
	fmt.Printf("%-46s %14d %14s %8s  %s\n", "idle CPU ticks over "+span.String(), t1-t0, "", "", "0")
	fmt.Printf("%-46s %14.1f %14s %8s  %s\n", "idle RSS (MiB)", float64(rssKiB(pid))/1024, "", "", "< 30 MiB")
}

func ticks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	// Fields after the command name (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n
		}
	}
	return 0
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

func check(err error) {
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	// A daemon left running would hold a pipe reading the bench's output
	// open (and its socket): they are stopped, killed if they linger.
	children.Lock()
	running := 0
	for _, p := range children.ps {
		if p.Signal(syscall.SIGTERM) == nil {
			running++
		}
	}
	if running > 0 {
		time.Sleep(time.Second)
		for _, p := range children.ps {
			p.Kill()
		}
	}
	os.Exit(1)
}

// children are the processes the bench started, which fatal stops.
var children struct {
	sync.Mutex
	ps []*os.Process
}

// start starts cmd, which fatal stops if it is still running then.
func start(cmd *exec.Cmd) {
	check(cmd.Start())
	children.Lock()
	children.ps = append(children.ps, cmd.Process)
	children.Unlock()
}
