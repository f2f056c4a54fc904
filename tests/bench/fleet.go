package main

import (
	"github.com/nats-io/nkeys"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// benchFleet measures a fleet of two daemons on one nats-server with
// JetStream: a run placed on the other node (ox-spawn --node) against the
// same run on the local node, end to end; and the events per second one
// fleet-wide subscriber sees while both nodes save, against a local
// subscriber of one node's saves.
func benchFleet(dir string, n int) {
	if _, err := exec.LookPath("nats-server"); err != nil {
		fmt.Println("fleet: skipped (nats-server is not installed: apt-get install nats-server)")
		return
	}
	dir = filepath.Join(dir, "fleet")
	check(os.MkdirAll(dir, 0o700))
	// Each node signs with its own nkey and trusts the other's (issue
	// 44): the remote rows include signing and verifying each call.
	seeds, pubs := map[string]string{}, map[string]string{}
	for _, name := range []string{"a", "b"} {
		kp, err := nkeys.CreateUser()
		check(err)
		seed, _ := kp.Seed()
		pubs[name], _ = kp.PublicKey()
		seeds[name] = filepath.Join(dir, name+".nk")
		check(os.WriteFile(seeds[name], seed, 0o600))
	}
	// A NATS server as contrib/fleet's: only the nodes' nkey users get in
	// (a node with an nkey cannot talk to a server that asks none: it has
	// no nonce to sign). users "" is a server that lets anyone in, for
	// the fleet that signs nothing.
	natsServer := func(js string, users ...string) (url string, stop func()) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n", port, filepath.Join(dir, js))
		if len(users) > 0 {
			var us []string
			for _, u := range users {
				us = append(us, fmt.Sprintf("{nkey: %q}", u))
			}
			conf += "authorization { users: [" + strings.Join(us, ", ") + "] }\n"
		}
		cf := filepath.Join(dir, js+".conf")
		check(os.WriteFile(cf, []byte(conf), 0o600))
		ns := exec.Command("nats-server", "-c", cf)
		start(ns)
		return fmt.Sprintf("nats://127.0.0.1:%d", port), func() { ns.Process.Kill(); ns.Wait() }
	}
	url, stopNATS := natsServer("js", pubs["a"], pubs["b"])
	defer stopNATS()
	uurl, stopUNATS := natsServer("ujs")
	defer stopUNATS()
	node := func(name string) *daemon {
		other := map[string]string{"a": "b", "b": "a"}[name]
		cf := filepath.Join(dir, name+".toml")
		check(os.WriteFile(cf, []byte(fmt.Sprintf("[fleet]\nservers = [%q]\nnode = %q\nheartbeat = \"1s\"\nnkey = %q\nadmins = [%q]\n\n[fleet.peers]\n%s = %q\n",
			url, name, seeds[name], other, other, pubs[other])), 0o600))
		if name[0] == 'u' {
			// The anchor: a fleet that signs nothing (insecure), on a
			// NATS server of its own.
			check(os.WriteFile(cf, []byte(fmt.Sprintf("[fleet]\nservers = [%q]\nnode = %q\nheartbeat = \"1s\"\ninsecure = true\n", uurl, name)), 0o600))
		}
		sock := filepath.Join(dir, name+".sock")
		cmd := exec.Command(filepath.Join(*binDir, "oxiosd"), "--config", cf, "--no-mount", "--log-level", "warn",
			"--data", filepath.Join(dir, name), "--socket", sock)
		cmd.Stderr = os.Stderr
		start(cmd)
		return waitDaemon(cmd, sock)
	}
	a, b := node("a"), node("b")
	defer a.stop()
	defer b.stop()
	ua, ub := node("ua"), node("ub")
	defer ua.stop()
	defer ub.stop()
	c := dial(a.sock)
	defer c.Close()
	ctx := context.Background()
	for _, d := range []*daemon{a, ua} {
		dc := dial(d.sock)
		for deadline := time.Now().Add(120 * time.Second); ; {
			nodes := 0
			dc.FleetStatus(ctx, func(proto.NodeRecord) error { nodes++; return nil })
			if nodes == 2 {
				break
			}
			if time.Now().After(deadline) {
				fatal(fmt.Errorf("fleet: the two nodes did not see each other in 120s (JetStream places its streams in a second on a quiet machine)"))
			}
			time.Sleep(100 * time.Millisecond)
		}
		dc.Close()
	}

	spawn := filepath.Join(*binDir, "ox-spawn")
	// Each round times a local run, a signed placement and an unsigned
	// one in turn, so that the three medians share the machine's moods.
	ds := [3][]time.Duration{}
	for range n {
		for j, run := range []struct {
			sock string
			args []string
		}{{a.sock, nil}, {a.sock, []string{"--node", "b"}}, {ua.sock, []string{"--node", "ub"}}} {
			cmd := exec.Command(spawn, append(append([]string{"-a", "bench", "-n", "--socket", run.sock}, run.args...), "--", "/bin/true")...)
			cmd.Stdout = io.Discard
			t := time.Now()
			check(cmd.Run())
			ds[j] = append(ds[j], time.Since(t))
		}
	}
	local, remote, unsigned := median(ds[0]), median(ds[1]), median(ds[2])
	reportMs("fleet: ox-spawn -- /bin/true on the local node (median)", local, 0, "")
	reportMs("fleet: ox-spawn --node other -- /bin/true (median)", remote, local, "")
	reportMs("fleet: placement overhead over local (median)", remote-local, 0, "<= 20 ms")
	reportMs("fleet: the same placement in a fleet that signs nothing (median)", unsigned, 0, "")
	reportMs("fleet: signed placement over unsigned (median)", remote-unsigned, 0, "<= 3 ms")

	// Events: what one subscriber sees of saves, locally and fleet-wide.
	count := func(fleet bool, writers ...*daemon) float64 {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		sub := dial(a.sock)
		defer sub.Close()
		var seen atomic.Int64
		ready := make(chan struct{}, 1)
		each := func(json.RawMessage) error {
			seen.Add(1)
			select {
			case ready <- struct{}{}:
			default:
			}
			return nil
		}
		args := proto.EventsArgs{Types: []string{"state.*"}}
		go func() {
			if fleet {
				sub.FleetCall(sctx, proto.FleetAll, proto.OpEvents, args, each)
			} else {
				sub.Events(sctx, args, each)
			}
		}()
		// The subscription is up once a first save shows.
		w := dial(writers[0].sock)
		for i := 0; ; i++ {
			w.StateSave(ctx, "bench", "warm", []byte("x"))
			select {
			case <-ready:
			case <-time.After(100 * time.Millisecond):
				continue
			}
			break
		}
		w.Close()
		start := seen.Load()
		t := time.Now()
		var stop atomic.Bool
		done := make(chan struct{})
		for i, d := range writers {
			go func() {
				cc := dial(d.sock)
				defer cc.Close()
				saves(cc, fmt.Sprintf("ev%d-%d", i, time.Now().UnixNano()), 64, &stop)
				done <- struct{}{}
			}()
		}
		time.Sleep(*dur)
		stop.Store(true)
		for range writers {
			<-done
		}
		// What is still on its way counts: wait until the count settles.
		for last := int64(-1); last != seen.Load(); {
			last = seen.Load()
			time.Sleep(300 * time.Millisecond)
		}
		return float64(seen.Load()-start) / time.Since(t).Seconds()
	}
	loc := count(false, a)
	report("fleet: events/s, local subscriber, 1 node saving", loc, 0, "baseline")
	report("fleet: events/s, --fleet subscriber, 2 nodes saving", count(true, a, b), loc, "(no target)")
}
