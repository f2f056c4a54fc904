package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// countWriter counts the writes made on a connection.
type countWriter struct {
	w      io.Writer
	writes atomic.Int64
}

// countWrites has c's writes to its connection counted.
func countWrites(c *Client) *countWriter {
	cc := &countWriter{w: c.ncw}
	c.ncw = cc
	return cc
}

func (c *countWriter) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.w.Write(b)
}

// A pipeline's run of calls is one write, its replies reach each call
// whatever order they are waited in, and a call the daemon refuses fails
// alone.
func TestPipelineOneWrite(t *testing.T) {
	d := startFake(t)
	c := dialFake(t, d)
	cc := countWrites(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 3 {
		p := c.Pipeline()
		var ps []*Pending
		for i := range 100 {
			if i == 50 {
				ps = append(ps, p.Call("test.nope", proto.StateArgs{Agent: "a", Key: "x"}))
				continue
			}
			ps = append(ps, p.StateLoad("a", fmt.Sprintf("r%d/k%d", round, i)))
		}
		if p.Len() != 100 {
			t.Fatalf("queued %d", p.Len())
		}
		before := cc.writes.Load()
		if err := p.Send(); err != nil {
			t.Fatal(err)
		}
		if n := cc.writes.Load() - before; n != 1 {
			t.Fatalf("round %d: 100 calls took %d writes, want 1", round, n)
		}
		if p.Len() != 0 {
			t.Fatalf("a sent pipeline still holds %d", p.Len())
		}
		// Waited for last to first.
		for i := len(ps) - 1; i >= 0; i-- {
			v, rec, err := ps[i].Value(ctx)
			if i == 50 {
				var perr *proto.Error
				if !errors.As(err, &perr) || perr.Code != proto.EINVAL {
					t.Fatalf("refused call: %v", err)
				}
				continue
			}
			want := fmt.Sprintf("r%d/k%d", round, i)
			if err != nil || string(v) != want || rec.Key != want {
				t.Fatalf("call %d: %q %+v %v", i, v, rec, err)
			}
		}
		if err := ps[0].Wait(ctx, nil); err == nil {
			t.Fatal("a second wait for the same call succeeded")
		}
	}
	// Not sent: nothing to wait for.
	if err := c.Pipeline().StateLoad("a", "k").Wait(ctx, nil); err == nil {
		t.Fatal("waiting for a call never sent succeeded")
	}
}

// Pipelines and plain calls share one client from many goroutines.
func TestPipelineShared(t *testing.T) {
	d := startFake(t)
	c := dialFake(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	parallel(t, 16, func(g int) error {
		p := c.Pipeline()
		for i := range 200 {
			if g%2 == 0 {
				key := fmt.Sprintf("g%d/%d", g, i)
				if v, _, err := c.StateLoad(ctx, "a", key); err != nil || string(v) != key {
					return fmt.Errorf("%s: %q %v", key, v, err)
				}
				continue
			}
			ps := make([]*Pending, 1+i%16)
			for j := range ps {
				ps[j] = p.StateLoad("a", fmt.Sprintf("g%d/%d/%d", g, i, j))
			}
			if err := p.Send(); err != nil {
				return err
			}
			for j, pd := range ps {
				key := fmt.Sprintf("g%d/%d/%d", g, i, j)
				if v, _, err := pd.Value(ctx); err != nil || string(v) != key {
					return fmt.Errorf("%s: %q %v", key, v, err)
				}
			}
		}
		return nil
	})
}

// A pipeline on a dead connection fails each call with the reason.
func TestPipelineDeadConnection(t *testing.T) {
	d := startFake(t)
	c := dialFake(t, d)
	ctx := context.Background()
	p := c.Pipeline()
	hang := p.Call("test.hang", proto.StateArgs{})
	drop := p.Call("test.drop", proto.StateArgs{})
	if err := p.Send(); err != nil {
		t.Fatal(err)
	}
	for _, pd := range []*Pending{hang, drop} {
		if err := pd.Wait(ctx, nil); !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("call on a dropped connection: %v", err)
		}
	}
}
