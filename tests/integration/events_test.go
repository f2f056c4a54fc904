package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// eventLine is what the tests read of an event stream's records.
type eventLine struct {
	Type   string `json:"type"`
	Event  string `json:"event"`
	Seq    uint64 `json:"seq"`
	Agent  string `json:"agent"`
	Key    string `json:"key"`
	Count  uint64 `json:"count"`
	Replay bool   `json:"replay"`
}

// startEvents runs ox-events with args and sends each record it prints on
// the returned channel (closed when ox-events exits).
func startEvents(t *testing.T, d *daemon, args ...string) <-chan eventLine {
	t.Helper()
	cmd := exec.Command(bin("ox-events"), args...)
	cmd.Env = append(cmd.Environ(), "OXIOS_SOCKET="+d.sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan eventLine, 1<<16) // read at once: a slow test must not make ox-events the stalled reader
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev eventLine
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("ox-events printed %q: %v", sc.Text(), err)
				continue
			}
			ch <- ev
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("ox-events %v stderr: %s", args, stderr.String())
		}
	})
	return ch
}

// next reads an event from ch within a deadline.
func next(t *testing.T, ch <-chan eventLine) eventLine {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("ox-events ended early")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
	}
	panic("unreachable")
}

// TestEventsStalledSubscriber: three subscribers while 20,000 saves
// commit; one never reads. The saves all complete (the kernel does not
// wait for the stalled one), the two readers get every event in commit
// order, and the stalled one, once it reads, gets a "lost" record with a
// count and then the events after it.
func TestEventsStalledSubscriber(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ctx := context.Background()

	// Each subscribes with since_seq 1: whenever its subscription begins,
	// it gets every event from the first on (replayed, then live).
	cli := startEvents(t, d, "--type", "state.*", "--since", "1")
	var lib []eventLine
	var libMu sync.Mutex
	libCtx, stopLib := context.WithCancel(ctx)
	defer stopLib()
	libDone := make(chan error, 1)
	go func() {
		c2 := d.client(t)
		libDone <- c2.Events(libCtx, proto.EventsArgs{Agent: "ev", SinceSeq: 1}, func(rec json.RawMessage) error {
			var ev eventLine
			if err := json.Unmarshal(rec, &ev); err != nil {
				return err
			}
			libMu.Lock()
			lib = append(lib, ev)
			libMu.Unlock()
			return nil
		})
	}()
	stalled := d.raw(t)
	stalled.send(`{"id":1,"op":"events.subscribe","args":{"agent":"ev","since_seq":1}}`)

	_, err := c.StateSave(ctx, "ev", "marker", []byte("m"))
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, cli); ev.Key != "marker" {
		t.Fatalf("first event: %+v", ev)
	}
	eventually(t, "the library subscriber's marker", func() bool {
		libMu.Lock()
		defer libMu.Unlock()
		return len(lib) == 1 && lib[0].Key == "marker"
	})

	const writers, each = 16, 1250
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cw := d.client(t)
			for i := 0; i < each; i++ {
				if _, err := cw.StateSave(ctx, "ev", fmt.Sprintf("w%d/k%d", w, i), []byte("v")); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	const total = writers * each

	// The CLI reader: every event, in order, nothing lost.
	last := uint64(0)
	for i := 0; i < total; i++ {
		ev := next(t, cli)
		if ev.Type != "event" || ev.Event != "state.changed" || ev.Seq <= last {
			t.Fatalf("cli event %d: %+v after seq %d", i, ev, last)
		}
		last = ev.Seq
	}
	eventually(t, "the library subscriber's events", func() bool {
		libMu.Lock()
		defer libMu.Unlock()
		return len(lib) >= total+1
	})
	libMu.Lock()
	for i := 1; i < len(lib); i++ {
		if lib[i].Type != "event" || lib[i].Seq <= lib[i-1].Seq {
			t.Fatalf("library event %d: %+v after %+v", i, lib[i], lib[i-1])
		}
	}
	if len(lib) != total+1 {
		t.Fatalf("library subscriber got %d events, want %d", len(lib), total+1)
	}
	libMu.Unlock()

	// The stalled reader starts reading: events in order, then "lost";
	// once it has caught up, a new save reaches it.
	var got, lost uint64
	prev := uint64(0)
	for after := false; ; {
		r := stalled.reply()
		if r.Item == nil {
			t.Fatalf("the stalled stream ended: %+v", r)
		}
		var ev eventLine
		if err := json.Unmarshal(r.Item, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "lost" {
			if ev.Count == 0 {
				t.Fatal("a lost record with count 0")
			}
			lost += ev.Count
			if !after {
				after = true
				if _, err := c.StateSave(ctx, "ev", "after", []byte("a")); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if ev.Seq <= prev {
			t.Fatalf("stalled reader: seq %d after %d", ev.Seq, prev)
		}
		prev = ev.Seq
		got++
		if ev.Key == "after" {
			break
		}
	}
	if lost == 0 {
		t.Fatalf("the stalled reader got %d events and no lost record", got)
	}
	// Every event is either received or counted as lost.
	if got+lost != total+2 {
		t.Fatalf("stalled reader: %d received + %d lost, want %d", got, lost, total+2)
	}
	t.Logf("stalled reader: %d received, %d lost", got, lost)
	stopLib()
	if err := <-libDone; err != nil && err != context.Canceled && !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("library stream: %v", err)
	}
}

// TestEventsSinceReplay: a reader that disconnects and comes back with
// --since (the last seq seen plus one) gets exactly what it missed, then
// live events, with saves racing the switch from replay to live: nothing
// lost, nothing twice.
func TestEventsSinceReplay(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for i := 0; i < 5; i++ {
		d.mustOx(t, "", "ox-state", "save", "-a", "re", fmt.Sprintf("k%d", i), "v")
	}
	first := startEvents(t, d, "--since", "1", "-n", "5")
	var seen []uint64
	for ev := range first {
		if !ev.Replay || ev.Event != "state.changed" {
			t.Fatalf("replayed event: %+v", ev)
		}
		seen = append(seen, ev.Seq)
	}
	if fmt.Sprint(seen) != "[1 2 3 4 5]" {
		t.Fatalf("first reader: seqs %v", seen)
	}
	// Disconnected: these are missed...
	for i := 5; i < 10; i++ {
		d.mustOx(t, "", "ox-state", "save", "-a", "re", fmt.Sprintf("k%d", i), "v")
	}
	// ... and replayed, while more saves race the replay.
	const more = 200
	again := startEvents(t, d, "--since", "6", "-n", fmt.Sprint(5+more))
	c := d.client(t)
	for i := 0; i < more; i++ {
		if _, err := c.StateSave(context.Background(), "re", fmt.Sprintf("m%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	want := uint64(6)
	for ev := range again {
		if ev.Seq != want {
			t.Fatalf("after reconnect: seq %d, want %d (%+v)", ev.Seq, want, ev)
		}
		want++
	}
	if want != 6+5+more {
		t.Fatalf("after reconnect: got up to seq %d, want %d", want-1, 5+5+more)
	}
}
