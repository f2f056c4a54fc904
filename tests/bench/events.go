package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/proto"
)

// benchEvents measures the event bus (issue 8): its fan-out in process
// (10 subscribers, at 100k events/s and flat out), and through oxiosd the
// latency of a syscall that publishes (state.save) under a load of saves,
// without subscribers and with 10 ox-events-like subscribers reading every
// event, in the same run.
func benchEvents(d *daemon) {
	sock := d.sock
	const subs = 10
	// In process: 10 subscribers draining as fast as they can.
	fan := func(perSec float64, span time.Duration) (pub, got, lost float64) {
		b := bus.New()
		var wg sync.WaitGroup
		var recv, drop atomic.Int64
		stop := make(chan struct{})
		for i := 0; i < subs; i++ {
			s := b.Subscribe(8192, nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer s.Close()
				var evs []bus.Event
				for {
					select {
					case <-s.Ready():
					case <-stop:
						evs, l := s.Take(evs[:0])
						recv.Add(int64(len(evs)))
						drop.Add(int64(l))
						return
					}
					var l uint64
					evs, l = s.Take(evs[:0])
					recv.Add(int64(len(evs)))
					drop.Add(int64(l))
				}
			}()
		}
		ev := bus.Event{Name: "state.changed", Agent: "bench", Key: "k", Op: "state.save", Result: "ok", Time: time.Now()}
		start := time.Now()
		var n int64
		for time.Since(start) < span {
			// Batches of 64, as the committer publishes a batch at once.
			if perSec > 0 {
				due := int64(perSec * time.Since(start).Seconds())
				if n >= due {
					time.Sleep(100 * time.Microsecond)
					continue
				}
			}
			evs := make([]bus.Event, 64)
			for i := range evs {
				evs[i] = ev
				evs[i].Seq = uint64(n + int64(i) + 1)
			}
			b.Publish(evs...)
			n += 64
		}
		el := time.Since(start).Seconds()
		close(stop)
		wg.Wait()
		return float64(n) / el, float64(recv.Load()) / subs / el, float64(drop.Load())
	}
	pub, got, lost := fan(100000, *dur)
	report("bus: 100k events/s paced, 10 subs: published/s", pub, 0, ">= 100k/s")
	report("bus: ... delivered per subscriber (/s)", got, pub, "1.00x")
	report("bus: ... events lost (all subscribers)", lost, 0, "0")
	pub, got, _ = fan(0, *dur)
	report("bus: flat out, 10 subs: published/s", pub, 0, "(capacity)")
	report("bus: ... delivered per subscriber (/s)", got, pub, "")

	// Through oxiosd: the latency of a save under a load of saves, then
	// the same with 10 subscribers of every event.
	// cpu is the CPU time (us) per save of oxiosd and of this process
	// (its clients and subscribers) over a phase.
	type cpu struct{ daemon, bench float64 }
	phase := func(nsubs int) (lat []time.Duration, evRate, delivered float64, used cpu) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got, ready atomic.Int64
		var swg sync.WaitGroup
		for i := 0; i < nsubs; i++ {
			c := dial(sock)
			swg.Add(1)
			go func() {
				defer swg.Done()
				defer c.Close()
				first := true
				c.Events(ctx, proto.EventsArgs{}, func(rec json.RawMessage) error {
					got.Add(1)
					if first {
						first = false
						ready.Add(1)
					}
					return nil
				})
			}()
		}
		if nsubs > 0 {
			// Subscribed: a save reaches every subscriber. A subscription
			// the daemon has not taken yet misses a save, so the save is
			// made again until each has had one.
			c := dial(sock)
			deadline := time.Now().Add(30 * time.Second)
			for ready.Load() < int64(nsubs) {
				if time.Now().After(deadline) {
					fatal(fmt.Errorf("events: %d of %d subscribers saw a save", ready.Load(), nsubs))
				}
				c.StateSave(ctx, "evbench", "ready", []byte("x"))
				time.Sleep(10 * time.Millisecond)
			}
			c.Close()
		}
		var stop atomic.Bool
		var saved atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			c := dial(sock)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				saved.Add(saves(c, fmt.Sprintf("load%d", w), 64, &stop))
			}()
		}
		probe := dial(sock)
		g0 := got.Load()
		d0, b0 := ticks(d.cmd.Process.Pid), ticks(os.Getpid())
		start := time.Now()
		v := []byte(strings.Repeat("p", 100))
		for time.Since(start) < *dur {
			t := time.Now()
			if _, err := probe.StateSave(context.Background(), "evbench", "probe", v); err != nil {
				fatal(err)
			}
			lat = append(lat, time.Since(t))
		}
		el := time.Since(start).Seconds()
		stop.Store(true)
		d1, b1 := ticks(d.cmd.Process.Pid), ticks(os.Getpid())
		wg.Wait()
		n := float64(saved.Load()) + float64(len(lat))
		// /proc counts CPU time in ticks of 1/100 s.
		used = cpu{float64(d1-d0) * 1e4 / n, float64(b1-b0) * 1e4 / n}
		probe.Close()
		delivered = float64(got.Load()-g0) / el
		cancel()
		swg.Wait()
		return lat, n / el, delivered, used
	}
	pct := func(l []time.Duration, p int) time.Duration {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l[len(l)*p/100]
	}
	// The two phases alternate (A B B A...), *rounds times each, and the
	// figures are medians over the rounds (of each round's median or
	// p99): the cost
	// of a save grows as a run goes on (its file system ages: on ext4
	// without a journal, creating a file scans the inodes deleted in the
	// last minutes), and running one phase after the other put that on
	// the second.
	var m0, m1, p0, p1 []time.Duration
	var r0, r1, dl, cd0, cb0, cd1, cb1 []float64
	for i := range 2 * *rounds {
		// A B B A A B...: each phase runs first as often as second.
		if (i+i/2)%2 == 0 {
			l, r, _, c := phase(0)
			m0, p0 = append(m0, pct(l, 50)), append(p0, pct(l, 99))
			r0, cd0, cb0 = append(r0, r), append(cd0, c.daemon), append(cb0, c.bench)
			continue
		}
		l, r, d, c := phase(subs)
		m1, p1 = append(m1, pct(l, 50)), append(p1, pct(l, 99))
		r1, dl, cd1, cb1 = append(r1, r), append(dl, d), append(cd1, c.daemon), append(cb1, c.bench)
	}
	cpuNote := func(d, b []float64) string {
		return fmt.Sprintf("CPU/save: oxiosd %.1f us, bench %.1f us", median(d), median(b))
	}
	round := fmt.Sprintf(", median of %d", *rounds)
	report("oxiosd: saves (events) /s, 16 clients, no subs"+round, median(r0), 0, cpuNote(cd0, cb0))
	report("oxiosd: saves (events) /s, 16 clients, 10 subs"+round, median(r1), median(r0), cpuNote(cd1, cb1))
	report("oxiosd: events delivered /s (10 subs, all)", median(dl), median(r1)*subs, "1.00x")
	reportMs("state.save latency, no subscribers (median)", median(m0), 0, "")
	reportMs("state.save latency, 10 subscribers (median)", median(m1), median(m0), "<= 1.10x")
	reportMs("state.save latency, no subscribers (p99)", median(p0), 0, "")
	reportMs("state.save latency, 10 subscribers (p99)", median(p1), median(p0), "")
}
