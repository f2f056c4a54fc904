package main

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"
)

// benchHostile measures a normal client (sequential 100 B loads) on a
// quiet daemon, then while 16 connections send request lines that never
// end (each up to max_line) and while 2,000 connections sit idle, in the
// same run (issue 18: p99 at most 3x quiet, RSS under 200 MiB).
func benchHostile(d *daemon) {
	c := dial(d.sock)
	defer c.Close()
	ctx := context.Background()
	_, err := c.StateSave(ctx, "bench", "v100", []byte(strings.Repeat("x", 100)))
	check(err)
	pcts := func() (p50, p99 time.Duration) {
		var lat []time.Duration
		end := time.Now().Add(*dur)
		for time.Now().Before(end) {
			t0 := time.Now()
			if _, _, err := c.StateLoad(ctx, "bench", "v100"); err != nil {
				fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[len(lat)/2], lat[len(lat)*99/100]
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
	q50, q99 := pcts()
	report("normal client, quiet: load p50 (us)", us(q50), 0, "baseline")
	report("normal client, quiet: load p99 (us)", us(q99), 0, "baseline")

	// 16 connections each sending an unterminated line, flat out.
	var attackers []net.Conn
	stop := make(chan struct{})
	for range 16 {
		a, err := net.Dial("unix", d.sock)
		check(err)
		attackers = append(attackers, a)
		go func() {
			a.Write([]byte(`{"id":1,"op":"state.save","args":{"agent":"bench","key":"k","value":"`))
			chunk := []byte(strings.Repeat("x", 64<<10))
			for sent := 0; sent < 22<<20; sent += len(chunk) { // under the default max_line
				select {
				case <-stop:
					return
				default:
				}
				if _, err := a.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	a50, a99 := pcts()
	rss := rssKiB(d.cmd.Process.Pid)
	report("  under 16 unterminated lines: p50 (us)", us(a50), us(q50), "")
	report("  under 16 unterminated lines: p99 (us)", us(a99), us(q99), "<= 3x quiet")
	report("  under 16 unterminated lines: RSS (MiB)", float64(rss)/1024, 0, "< 200 MiB")
	close(stop)
	for _, a := range attackers {
		a.Close()
	}

	// 2,000 connections that say nothing.
	var idlers []net.Conn
	for range 2000 {
		a, err := net.Dial("unix", d.sock)
		if err != nil {
			fmt.Printf("  (idle connections: %d opened: %v)\n", len(idlers), err)
			break
		}
		idlers = append(idlers, a)
	}
	time.Sleep(500 * time.Millisecond)
	i50, i99 := pcts()
	rss = rssKiB(d.cmd.Process.Pid)
	report("  under 2,000 idle connections: p50 (us)", us(i50), us(q50), "")
	report("  under 2,000 idle connections: p99 (us)", us(i99), us(q99), "<= 3x quiet")
	report("  under 2,000 idle connections: RSS (MiB)", float64(rss)/1024, 0, "< 200 MiB")
	for _, a := range idlers {
		a.Close()
	}
}
