package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/client"
)

// The peer rows put oxiosd's loads and durable saves next to Redis doing
// the same work in the same run: Redis over a Unix socket of its own,
// 100-byte values, appendonly with appendfsync always (every write
// acknowledged only once fsynced, as an oxiosd save is). Both sides are
// driven by the same kind of raw client below (write the request bytes,
// read the reply, no decoding beyond checking it succeeded), so the
// figures are the servers' and not a client library's; the rows through
// pkg/client show what the library adds. Rounds alternate between the two
// and each figure is the median of its rounds, so a neighbour's burst of
// load hits both sides alike.

// redis is a redis-server the bench started.
type redis struct {
	cmd  *exec.Cmd
	sock string
}

// startRedis starts redis-server on a socket in dir, or returns nil when
// there is no redis-server on PATH.
func startRedis(dir string) *redis {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil
	}
	rdir := filepath.Join(dir, "redis")
	check(os.MkdirAll(rdir, 0o700))
	sock := filepath.Join(rdir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--dir", rdir, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--daemonize", "no", "--logfile", filepath.Join(rdir, "redis.log"))
	start(cmd)
	for i := 0; i < 500; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			r := &redis{cmd: cmd, sock: sock}
			rc := r.dial()
			rc.do(respCmd("SET", "v100", strings.Repeat("x", 100)))
			rc.Close()
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	fatal(fmt.Errorf("redis-server did not start"))
	return nil
}

func (r *redis) stop() {
	if r != nil {
		r.cmd.Process.Signal(syscall.SIGTERM)
		r.cmd.Wait()
	}
}

// respCmd encodes a command in RESP, as redis-cli sends it.
func respCmd(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// rawConn is one connection of a raw client: requests are written as
// bytes and replies read as lines, for Redis (RESP) or oxiosd (JSON lines).
type rawConn struct {
	net.Conn
	r    *bufio.Reader
	resp bool
}

func (r *redis) dial() *rawConn {
	c, err := net.Dial("unix", r.sock)
	check(err)
	return &rawConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10), resp: true}
}

func dialRaw(sock string) *rawConn {
	c, err := net.Dial("unix", sock)
	check(err)
	rc := &rawConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}
	if l, err := rc.r.ReadSlice('\n'); err != nil || !bytes.HasPrefix(l, []byte(`{"hello":`)) {
		fatal(fmt.Errorf("raw client: no hello from oxiosd: %q %v", l, err))
	}
	return rc
}

// do writes req (n requests) and reads n replies, failing on an error reply.
func (c *rawConn) do(req []byte) { c.doN(req, 1) }

func (c *rawConn) doN(req []byte, n int) {
	if _, err := c.Write(req); err != nil {
		fatal(err)
	}
	for i := 0; i < n; i++ {
		l, err := c.r.ReadSlice('\n')
		if err != nil {
			fatal(fmt.Errorf("raw client: %v", err))
		}
		if !c.resp {
			if !bytes.Contains(l, []byte(`"ok":true`)) {
				fatal(fmt.Errorf("oxiosd refused: %s", l))
			}
			continue
		}
		switch l[0] {
		case '-':
			fatal(fmt.Errorf("redis refused: %s", l))
		case '$':
			size, _ := strconv.Atoi(string(bytes.TrimSpace(l[1:])))
			if size >= 0 {
				if _, err := c.r.Discard(size + 2); err != nil {
					fatal(err)
				}
			}
		}
	}
}

// The requests of both raw clients: a load (GET) of a 100-byte value, and
// a save (SET) of one; depth requests written at once.
func oxLoad(depth int) []byte {
	var b []byte
	for i := 0; i < depth; i++ {
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, int64(i+1), 10)
		b = append(b, `,"op":"state.load","args":{"agent":"bench","key":"v100"}}`+"\n"...)
	}
	return b
}

func redisGet(depth int) []byte {
	return bytes.Repeat(respCmd("GET", "v100"), depth)
}

func rawLoads(c *rawConn, req []byte, depth int, stop *atomic.Bool) int64 {
	defer c.Close()
	var n int64
	for !stop.Load() {
		c.doN(req, depth)
		n += int64(depth)
	}
	return n
}

// rawSaves saves to keys prefix/k0..k(keys-1) in turn, one at a time.
func rawSaves(c *rawConn, prefix string, keys int, stop *atomic.Bool) int64 {
	defer c.Close()
	v := strings.Repeat("s", 100)
	reqs := make([][]byte, keys)
	for i := range reqs {
		key := fmt.Sprintf("%s/k%d", prefix, i)
		if c.resp {
			reqs[i] = respCmd("SET", key, v)
		} else {
			reqs[i] = []byte(`{"id":1,"op":"state.save","args":{"agent":"bench","key":"` + key + `","value":"` + v + `"}}` + "\n")
		}
	}
	var n int64
	for !stop.Load() {
		c.do(reqs[n%int64(keys)])
		n++
	}
	return n
}

// versus measures ours and the anchor in alternating rounds and reports
// the medians; anchor nil prints the row as skipped, with why. Each
// measurement also gives the server's CPU time per operation (its
// utime+stime over the round): on a machine shared with other work the
// rate moves with the neighbours' load, the CPU an operation costs much
// less.
func versus(name, target string, ours, anchor func() (rate, cpu float64), skipped string) {
	var a, b, ca, cb []float64
	for i := 0; i < *rounds; i++ {
		r, c := ours()
		a, ca = append(a, r), append(ca, c)
		if anchor != nil {
			r, c = anchor()
			b, cb = append(b, r), append(cb, c)
		}
	}
	if anchor == nil {
		fmt.Printf("%-46s %14.0f %14s  skipped: %s (server CPU/op %.1f us)\n", name, median(a), "", skipped, median(ca))
		return
	}
	report(name, median(a), median(b), fmt.Sprintf("%-14s server CPU/op %.1f us vs %.1f us", target, median(ca), median(cb)))
}

// measured runs fn on conns connections like parallel and returns the
// rate and the CPU time (us) the process pid spent per operation.
func measured(pid, conns int, fn func(stop *atomic.Bool) int64) (rate, cpu float64) {
	t0 := ticks(pid)
	start := time.Now()
	rate = parallel(conns, fn)
	ops := rate * time.Since(start).Seconds()
	// /proc counts CPU time in ticks of 1/100 s.
	return rate, float64(ticks(pid)-t0) * 1e4 / max(ops, 1)
}

// peerRows measures loads and durable saves of oxiosd (its socket in d,
// the library client c) against Redis.
func peerRows(dir string, d *daemon, c *client.Client) {
	rd := startRedis(dir)
	defer rd.stop()
	const noRedis = "no redis-server"
	anchor := func(fn func(stop *atomic.Bool) int64, conns int) func() (float64, float64) {
		if rd == nil {
			return nil
		}
		return func() (float64, float64) { return measured(rd.cmd.Process.Pid, conns, fn) }
	}
	ours := func(fn func(stop *atomic.Bool) int64, conns int) func() (float64, float64) {
		return func() (float64, float64) { return measured(d.cmd.Process.Pid, conns, fn) }
	}
	const target = ">= 1.0x Redis"
	if run("load") {
		get1 := anchor(func(stop *atomic.Bool) int64 { return rawLoads(rd.dial(), redisGet(1), 1, stop) }, 1)
		versus("read 100 B, 1 conn, raw client (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return rawLoads(dialRaw(d.sock), oxLoad(1), 1, stop) }, 1), get1, noRedis)
		versus("  same through pkg/client (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return loads(c, stop) }, 1), get1, noRedis)
		get8 := anchor(func(stop *atomic.Bool) int64 { return rawLoads(rd.dial(), redisGet(1), 1, stop) }, 8)
		versus("read 100 B, 8 conns, raw client (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return rawLoads(dialRaw(d.sock), oxLoad(1), 1, stop) }, 8), get8, noRedis)
		versus("  same through pkg/client (/s)", target,
			ours(func(stop *atomic.Bool) int64 {
				cc := dial(d.sock)
				defer cc.Close()
				return loads(cc, stop)
			}, 8), get8, noRedis)
		get16 := anchor(func(stop *atomic.Bool) int64 { return rawLoads(rd.dial(), redisGet(16), 16, stop) }, 1)
		versus("read 100 B, 16-deep pipeline, raw client (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return rawLoads(dialRaw(d.sock), oxLoad(16), 16, stop) }, 1), get16, noRedis)
		versus("  same through pkg/client's Pipeline (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return pipeLoads(c, 16, stop) }, 1), get16, noRedis)
		versus("  16 callers on one pkg/client (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return loads(c, stop) }, 16), get16, noRedis)
	}
	if run("save") {
		report("disk: 200 B append + fdatasync, 1 writer (/s)", fsyncRate(dir), 0, "(for scale)")
		set1 := anchor(func(stop *atomic.Bool) int64 { return rawSaves(rd.dial(), "s1", 1, stop) }, 1)
		versus("durable write 100 B, 1 client, raw (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return rawSaves(dialRaw(d.sock), "s1", 1, stop) }, 1), set1, noRedis)
		versus("  same through pkg/client (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return saves(c, "s1", 1, stop) }, 1), set1, noRedis)
		var seq atomic.Int64
		prefix := func() string { return fmt.Sprintf("c%d", seq.Add(1)) }
		set64 := anchor(func(stop *atomic.Bool) int64 { return rawSaves(rd.dial(), prefix(), 16, stop) }, 64)
		versus("durable write 100 B, 64 clients, raw (/s)", target,
			ours(func(stop *atomic.Bool) int64 { return rawSaves(dialRaw(d.sock), prefix(), 16, stop) }, 64), set64, noRedis)
		versus("  same through pkg/client (/s)", target,
			ours(func(stop *atomic.Bool) int64 {
				cc := dial(d.sock)
				defer cc.Close()
				return saves(cc, prefix(), 16, stop)
			}, 64), set64, noRedis)
	}
}
