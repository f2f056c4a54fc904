package main

import (
	"context"
	"fmt"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// benchRemove measures agent.remove of an agent that holds n memories,
// committed, at 10k and 100k (-groups-1m: and 1M), and the p99 of another agent's saves while
// it runs, against the p99 of the same saves with nothing else running
// (target: under 50 ms; issue 45: the removal ran alone on the committer,
// and the saves waited for all of it, 8 s at 100k).
func benchRemove(d *daemon) {
	sock := d.sock
	c := dial(sock)
	defer c.Close()
	ctx := context.Background()
	for _, n := range groupSizes() {
		agent := fmt.Sprintf("remove%dk", n/1000)
		fillMemories(c, agent, n)
		_, err := c.Commit(ctx, proto.CommitArgs{Agent: agent})
		check(err)
		// Until the memories' files are written (the daemon idle): the
		// figures are not those of a file system busy creating them (at
		// 1M, minutes after the last remember is answered).
		idleAt(d, time.Second, 30*time.Minute)
		base, baseMax := savesWhile(sock, func() { time.Sleep(2 * time.Second) })
		var took time.Duration
		during, duringMax := savesWhile(sock, func() {
			start := time.Now()
			rec, err := c.AgentRemove(ctx, agent)
			check(err)
			took = time.Since(start)
			if !rec.Removed || rec.Memories != n {
				fatal(fmt.Errorf("agent remove: %+v, want %d memories removed", rec, n))
			}
		})
		report(fmt.Sprintf("agent remove of %dk memories (ms)", n/1000), float64(took.Milliseconds()), 0, "linear in n")
		report(fmt.Sprintf("other agent's save p99 in it, %dk (us)", n/1000), float64(during.Microseconds()), float64(base.Microseconds()), "< 50,000 us")
		report(fmt.Sprintf("  the longest, %dk (us)", n/1000), float64(duringMax.Microseconds()), float64(baseMax.Microseconds()), "tens of ms")
	}
}
