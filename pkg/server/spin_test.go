package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// Requests one after the other (where a connection spins for the next)
// and side by side (where none does) are all answered, and once the
// clients are gone nothing is counted as being served: a count left
// behind would keep every connection from spinning for good.
func TestSpinAndWorkingCount(t *testing.T) {
	c, sock, srv := serverAt(t)
	ctx := context.Background()
	if _, err := c.StateSave(ctx, "a", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if v, _, err := c.StateLoad(ctx, "a", "k"); err != nil || string(v) != "v" {
			t.Fatalf("load %d: %q %v", i, v, err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc, err := client.Dial(ctx, sock)
			if err != nil {
				errs <- err
				return
			}
			defer cc.Close()
			for i := range 300 {
				key := fmt.Sprintf("w%d/k%d", w, i%10)
				if _, err := cc.StateSave(ctx, "a", key, []byte("x")); err != nil {
					errs <- err
					return
				}
				if _, _, err := cc.StateLoad(ctx, "a", key); err != nil {
					errs <- err
					return
				}
			}
			// A stream in flight, cut by the close.
			sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			cc.Events(sctx, proto.EventsArgs{}, func(json.RawMessage) error { return nil })
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Working() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d still counted as served with every client gone", srv.Working())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
