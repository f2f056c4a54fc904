package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// fakeDaemon serves the wire protocol on a socket with a few ops of its
// own, writing replies in batches of random size the way oxiosd does
// (what it has read in one go, then a flush):
//
//	state.load   the record of args.key, whose value is the key
//	test.list    args.key items (an item's "key" is its number), then ok
//	test.hang    no reply ever
//	test.drop    the connection is closed
type fakeDaemon struct {
	sock string
	ln   net.Listener
}

func startFake(t *testing.T) *fakeDaemon {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	d := &fakeDaemon{sock: sock, ln: ln}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go d.serve(nc)
		}
	}()
	return d
}

func (d *fakeDaemon) serve(nc net.Conn) {
	defer nc.Close()
	r := bufio.NewReader(nc)
	w := bufio.NewWriter(nc)
	hello, _ := json.Marshal(proto.Reply{OK: true, Hello: &proto.Hello{Proto: proto.Version, Server: "fake"}})
	w.Write(append(hello, '\n'))
	w.Flush()
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct {
			ID   uint64          `json:"id"`
			Op   string          `json:"op"`
			Args proto.StateArgs `json:"args"`
		}
		if err := json.Unmarshal(line, &req); err != nil {
			return
		}
		reply := func(v any) {
			b, _ := json.Marshal(v)
			w.Write(append(b, '\n'))
		}
		switch req.Op {
		case proto.OpStateLoad:
			v := req.Args.Key
			res, _ := json.Marshal(proto.StateRecord{Type: "state", Agent: req.Args.Agent, Key: req.Args.Key, Size: int64(len(v)), Value: &v})
			reply(proto.Reply{ID: req.ID, OK: true, Result: res})
		case "test.list":
			n, _ := strconv.Atoi(req.Args.Key)
			for i := 0; i < n; i++ {
				reply(proto.Reply{ID: req.ID, Item: json.RawMessage(fmt.Sprintf(`{"key":"%d"}`, i))})
			}
			reply(proto.Reply{ID: req.ID, OK: true, Result: json.RawMessage(`{}`)})
		case "test.hang":
		case "test.drop":
			w.Flush()
			return
		default:
			reply(proto.Reply{ID: req.ID, Error: proto.Errorf(proto.EINVAL, "no op %s", req.Op)})
		}
		if r.Buffered() == 0 || rnd.Intn(4) == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

func dialFake(t *testing.T, d *fakeDaemon) *Client {
	t.Helper()
	c, err := Dial(context.Background(), d.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Many goroutines share one client: each call gets its own reply.
func TestSharedCallers(t *testing.T) {
	d := startFake(t)
	c := dialFake(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	parallel(t, 32, func(g int) error {
		for i := 0; i < 500; i++ {
			key := fmt.Sprintf("g%d/%d", g, i)
			v, rec, err := c.StateLoad(ctx, "a", key)
			if err != nil || string(v) != key || rec.Key != key {
				return fmt.Errorf("%s: %q %q %v", key, v, rec.Key, err)
			}
		}
		return nil
	})
}

// Callers woken by one batch of replies send their next requests in
// groups (groupFull): whether a caller's request fills a group, waits for
// the last woken caller, or is the last, none is left unsent, also when
// callers stop at different times and the rest are fewer than a group.
func TestSharedCallersGroups(t *testing.T) {
	d := startFake(t)
	c := dialFake(t, d)
	cc := countWrites(c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	calls := 0
	for round := range 20 {
		n := 2 + round*3 // 2 to 59 callers
		var total atomic.Int64
		parallel(t, n, func(g int) error {
			for i := range 1 + (g*7+round)%40 {
				key := fmt.Sprintf("r%d/g%d/%d", round, g, i)
				v, _, err := c.StateLoad(ctx, "a", key)
				if err != nil || string(v) != key {
					return fmt.Errorf("%s: %q %v", key, v, err)
				}
				total.Add(1)
			}
			return nil
		})
		calls += int(total.Load())
	}
	// Groups, not one write a call: fewer writes than calls.
	if w := cc.writes.Load(); w >= int64(calls) {
		t.Fatalf("%d calls took %d writes", calls, w)
	}
}

// parallel runs fn(0..n-1) on n goroutines and fails t with the errors
// they return.
func parallel(t *testing.T, n int, fn func(g int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(g); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A stream's consumer makes calls on the same client while other callers
// pipeline theirs: the items and the final reply may all come in one
// batch before the consumer is done with the first.
func TestStreamConsumerCalls(t *testing.T) {
	d := startFake(t)
	c := dialFake(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	parallel(t, 8, func(g int) error {
		for i := 0; i < 30; i++ {
			n := 0
			err := c.Stream(ctx, "test.list", proto.StateArgs{Key: "20"}, func(item json.RawMessage) error {
				var it struct{ Key string }
				json.Unmarshal(item, &it)
				if it.Key != strconv.Itoa(n) {
					return fmt.Errorf("item %d is %s", n, item)
				}
				n++
				key := fmt.Sprintf("g%d/%d/%s", g, i, it.Key)
				v, _, err := c.StateLoad(ctx, "a", key)
				if err == nil && string(v) != key {
					err = fmt.Errorf("%s: got %q", key, v)
				}
				return err
			})
			if err == nil && n != 20 {
				err = fmt.Errorf("%d items", n)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// A caller whose ctx ends stops waiting, whether it was reading the
// connection or waiting for another caller to.
func TestCancel(t *testing.T) {
	d := startFake(t)
	c := dialFake(t, d)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tctx, cancel := context.WithTimeout(ctx, time.Duration(10+10*g)*time.Millisecond)
			defer cancel()
			err := c.Call(tctx, "test.hang", proto.StateArgs{}, nil)
			// The first to give up was reading: its read ends with the
			// connection, and the others learn of that or of their ctx.
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrOutcomeUnknown) {
				t.Errorf("hang: %v", err)
			}
		}()
	}
	wg.Wait()
	if _, _, err := c.StateLoad(ctx, "a", "k"); err != nil {
		t.Fatal(err)
	}
}

// A connection lost with calls in flight fails them as of unknown outcome.
func TestLostConnection(t *testing.T) {
	d := startFake(t)
	c := dialFake(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Call(ctx, "test.hang", proto.StateArgs{}, nil)
			if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrUnreachable) {
				t.Errorf("hang: %v", err)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	err := c.Call(ctx, "test.drop", proto.StateArgs{}, nil)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("drop: %v", err)
	}
	wg.Wait()
	// The next call, with none in flight, dials again.
	if _, _, err := c.StateLoad(ctx, "a", "k"); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkSharedCallers(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	d := &fakeDaemon{sock: sock, ln: ln}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go d.serve(nc)
		}
	}()
	c, err := Dial(context.Background(), sock)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := c.StateLoad(context.Background(), "a", "k"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
