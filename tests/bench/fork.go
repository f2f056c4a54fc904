package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// benchFork measures agent.fork of an agent holding 10,000 keys against
// a commit of 10 changed keys of the same agent, both through oxiosd in
// the same run (target: a fork costs no more than that commit). The fork
// is a graft in git (the new agent's folder points at the old one's
// tree) and a copy of the agent's index, both durable in one journal
// batch; git's files get the graft, and the fork its index, right after
// the reply, in the background. The agent is removed again after each
// round, and its files with it (not timed): the removal commits twice,
// so it waits for both, and the next round's commit never shares the
// machine with them. The two take turns going first, so that neither
// always follows the other.
func benchFork(sock string) {
	const agent = "forksrc"
	keys := make(chan int, commitFiles)
	for i := range commitFiles {
		keys <- i
	}
	close(keys)
	val := []byte(strings.Repeat("fork bench state ", 12))
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(sock)
			defer c.Close()
			for i := range keys {
				_, err := c.StateSave(context.Background(), agent, fmt.Sprintf("d%03d/k%05d.md", i%300, i), val)
				check(err)
			}
		}()
	}
	wg.Wait()
	c := dial(sock)
	defer c.Close()
	ctx := context.Background()
	_, err := c.Commit(ctx, proto.CommitArgs{Agent: agent, Message: "fork bench: initial"})
	check(err)
	rounds := *forkRounds
	var commits, forks []time.Duration
	commit := func(round int) {
		for i := range 10 {
			_, err := c.StateSave(ctx, agent, fmt.Sprintf("d%03d/k%05d.md", i*29, i*997), fmt.Appendf(nil, "round %d %d", round, i))
			check(err)
		}
		start := time.Now()
		_, err := c.Commit(ctx, proto.CommitArgs{Agent: agent, Message: fmt.Sprint("fork bench round ", round)})
		check(err)
		commits = append(commits, time.Since(start))
	}
	fork := func(round int) {
		name := fmt.Sprintf("forkdst%d", round)
		start := time.Now()
		rec, err := c.Fork(ctx, proto.ForkArgs{Agent: agent, Name: name})
		check(err)
		forks = append(forks, time.Since(start))
		if rec.Files < commitFiles {
			fatal(fmt.Errorf("fork copied %d files, want %d", rec.Files, commitFiles))
		}
		_, err = c.AgentRemove(ctx, name)
		check(err)
	}
	for round := range rounds {
		// Alternate which goes first, so that neither always follows the
		// other's background work.
		if round%2 == 0 {
			commit(round)
			fork(round)
		} else {
			fork(round)
			commit(round)
		}
		// The applier links the fork's 10,000 files, then unlinks them,
		// behind the replies, once the store has been quiet for 200 ms:
		// let it finish before the next round, whose commit and fork
		// would otherwise share the disk with it.
		time.Sleep(time.Second)
	}
	reportMs(fmt.Sprintf("ox-fork of 10k keys via oxiosd, median of %d (ms)", rounds), median(forks), median(commits), "<= 1.0x commit of 10 keys")
	// Each round's fork against the commit beside it: this host's disk
	// drifts between rounds, which a ratio of medians taken over all of
	// them keeps and a median of paired ratios does not.
	ratios := make([]float64, rounds)
	for i := range rounds {
		ratios[i] = float64(forks[i]) / float64(commits[i])
	}
	fmt.Printf("%-46s %14s %14s %7.2fx  %s\n", "  same, median of the rounds' own ratios", "", "", median(ratios), "<= 1.0x")
}
