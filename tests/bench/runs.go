package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// benchSpawn measures a process run end to end (the ox-spawn command,
// from its start to its exit status) and the supervisor's own share
// (spawn + attach + exit through the client library), against a bare
// fork/exec of the same program in the same run.
func benchSpawn(d *daemon, n int) {
	bare := make([]time.Duration, n)
	for i := range bare {
		t := time.Now()
		check(exec.Command("/bin/true").Run())
		bare[i] = time.Since(t)
	}
	c := dial(d.sock)
	defer c.Close()
	ctx := context.Background()
	lib := make([]time.Duration, n)
	for i := range lib {
		t := time.Now()
		var exit bool
		check(c.SpawnAttach(ctx, proto.SpawnArgs{Agent: "bench", Command: []string{"/bin/true"}}, func(b json.RawMessage) error {
			var h struct{ Type string }
			json.Unmarshal(b, &h)
			exit = exit || h.Type == proto.RecordExit
			return nil
		}))
		lib[i] = time.Since(t)
		if !exit {
			fatal(fmt.Errorf("spawn: no exit record"))
		}
	}
	spawn := filepath.Join(*binDir, "ox-spawn")
	version := make([]time.Duration, n)
	cli := make([]time.Duration, n)
	for i := range cli {
		t := time.Now()
		check(exec.Command(spawn, "--version").Run())
		version[i] = time.Since(t)
		cmd := exec.Command(spawn, "-a", "bench", "--socket", d.sock, "--", "/bin/true")
		cmd.Stdout = io.Discard
		t = time.Now()
		check(cmd.Run())
		cli[i] = time.Since(t)
	}
	mb, ml, mc, mv := median(bare), median(lib), median(cli), median(version)
	reportMs("baseline: fork/exec /bin/true (median)", mb, 0, "")
	reportMs("baseline: ox-spawn --version, no daemon (median)", mv, 0, "")
	reportMs("spawn+attach+exit /bin/true, library (median)", ml, mb, "")
	reportMs("supervisor overhead over fork/exec (median)", ml-mb, 0, "<= 2 ms")
	reportMs("ox-spawn -a A -- /bin/true end to end (median)", mc, mb, "<= 10 ms")
	sort.Slice(cli, func(i, j int) bool { return cli[i] < cli[j] })
	reportMs("ox-spawn -a A -- /bin/true end to end (p99)", cli[len(cli)*99/100], 0, "")
}

// idleRuns watches oxiosd supervising 100 sleeping runs: CPU ticks and
// the RSS they add.
func idleRuns(d *daemon, span time.Duration) {
	c := dial(d.sock)
	defer c.Close()
	ctx := context.Background()
	pid := d.cmd.Process.Pid
	time.Sleep(6 * time.Second)
	before := rssKiB(pid)
	var ids []string
	for i := 0; i < 100; i++ {
		rec, err := c.Spawn(ctx, proto.SpawnArgs{Agent: "idle", Command: []string{"sleep", "100000"}})
		check(err)
		ids = append(ids, rec.ID)
	}
	defer func() {
		check(c.Kill(ctx, proto.KillArgs{Runs: ids, Signal: "KILL"}, func(proto.RunRecord) error { return nil }))
		check(c.Wait(ctx, ids, func(proto.ExitRecord) error { return nil }))
	}()
	// Let it settle as it does when idle (a collection 5 s after the last
	// request).
	time.Sleep(8 * time.Second)
	t0 := ticks(pid)
	fmt.Printf("\nwatching oxiosd with 100 idle runs (pid %d) for %s...\n", pid, span)
	time.Sleep(span)
	t1 := ticks(pid)
	after := rssKiB(pid)
	fmt.Printf("%-46s %14d %14s %8s  %s\n", "100 idle runs: CPU ticks over "+span.String(), t1-t0, "", "", "0")
	fmt.Printf("%-46s %14.1f %14.1f %8s  %s\n", "100 idle runs: RSS added (MiB; base before)", float64(after-before)/1024, float64(before)/1024, "", "< 20 MiB")
}
