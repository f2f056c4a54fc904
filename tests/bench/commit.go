package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/version"
)

// commitFiles is the size of the tree the commit benchmarks version: a
// few hundred folders of 100-500 byte files, like many agents' state.
const commitFiles = 10000

// benchCommit measures pkg/version's commits against git's own on
// identical copies of a 10,000-file tree under dir (on the same file
// system), in the same run:
//
//   - the initial commit of every file, against `git add -A && git
//     commit -q` (target: at most 1.0x);
//   - a commit of 10 changed files, against `git add -A && git commit -q`
//     after changing the same 10 files in git's copy (target: at most
//     0.2x; the median of several rounds).
//
// pkg/version is handed the content of what changed, as the daemon's
// committer hands it; git finds the changes itself by scanning its work
// tree, which is the cost this package exists to avoid. Writing git's
// work tree is not timed (the daemon writes its work tree either way).
//
// main calls it with its temporary directory and the daemon's socket.
func benchCommit(dir, sock string) {
	if !run("commit") {
		return
	}
	base := filepath.Join(dir, "commit")
	defer os.RemoveAll(base)
	gitDir := filepath.Join(base, "git")
	files := commitTree()
	paths := make([]string, 0, len(files))
	for p, v := range files {
		paths = append(paths, p)
		full := filepath.Join(gitDir, filepath.FromSlash(p))
		check(os.MkdirAll(filepath.Dir(full), 0o755))
		check(os.WriteFile(full, v, 0o644))
	}
	slices.Sort(paths)
	gitCmd(gitDir, "init", "-q", "-b", "main")
	// Flush the tree just written, so that its writeback is not charged
	// to git's timing.
	syscall.Sync()

	start := time.Now()
	gitCmd(gitDir, "add", "-A")
	gitCmd(gitDir, "commit", "-q", "-m", "initial")
	gitInit := time.Since(start)

	r, err := version.Open(filepath.Join(base, "ours"))
	check(err)
	defer r.Close()
	syscall.Sync()
	start = time.Now()
	tx, err := r.Begin()
	check(err)
	for p, v := range files {
		check(tx.Put(p, v))
	}
	_, err = tx.Commit(version.CommitOptions{Message: "initial"})
	check(err)
	oursInit := time.Since(start)
	reportMs("commit 10k files, initial (ms)", oursInit, gitInit, "<= 1.0x git add+commit")

	// The same 10 files, spread over the tree, change in every round.
	changed := make([]string, 10)
	for i := range changed {
		changed[i] = paths[i*len(paths)/len(changed)]
	}
	const rounds = 9
	var gitTimes, oursTimes []time.Duration
	for round := range rounds {
		values := make([][]byte, len(changed))
		for i := range values {
			values[i] = fmt.Appendf(nil, "round %d, file %d\n%s\n", round, i, bytes.Repeat([]byte("new state "), 20))
		}
		gitRound := func() {
			for i, p := range changed {
				check(os.WriteFile(filepath.Join(gitDir, filepath.FromSlash(p)), values[i], 0o644))
			}
			start := time.Now()
			gitCmd(gitDir, "add", "-A")
			gitCmd(gitDir, "commit", "-q", "-m", fmt.Sprint("round ", round))
			gitTimes = append(gitTimes, time.Since(start))
		}
		oursRound := func() {
			start := time.Now()
			tx, err := r.Begin()
			check(err)
			for i, p := range changed {
				check(tx.Put(p, values[i]))
			}
			_, err = tx.Commit(version.CommitOptions{Message: fmt.Sprint("round ", round)})
			check(err)
			oursTimes = append(oursTimes, time.Since(start))
		}
		// Alternate who goes first, so neither always finds a warm cache.
		if round%2 == 0 {
			gitRound()
			oursRound()
		} else {
			oursRound()
			gitRound()
		}
	}
	reportMs(fmt.Sprintf("commit 10 of 10k files, median of %d (ms)", rounds),
		median(oursTimes), median(gitTimes), "<= 0.2x git add+commit")
	benchCommitDaemon(sock, files, changed, gitInit, median(gitTimes))
}

// benchCommitDaemon measures the same commits end to end: the tree saved
// as state through oxiosd, then `version.commit` over the socket (the
// barrier on the committer, reading the changed values, the audit entry).
func benchCommitDaemon(sock string, files map[string][]byte, changed []string, gitInit, gitIncr time.Duration) {
	keys := make(chan string, len(files))
	for p := range files {
		keys <- p
	}
	close(keys)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(sock)
			defer c.Close()
			for p := range keys {
				agent, key, _ := strings.Cut(strings.TrimPrefix(p, "agents/"), "/state/")
				_, err := c.StateSave(context.Background(), agent, key, files[p])
				check(err)
			}
		}()
	}
	wg.Wait()
	c := dial(sock)
	defer c.Close()
	start := time.Now()
	rec, err := c.Commit(context.Background(), proto.CommitArgs{Message: "initial"})
	check(err)
	if len(rec.Changed) < len(files) {
		fatal(fmt.Errorf("initial commit through oxiosd changed %d paths, want %d", len(rec.Changed), len(files)))
	}
	reportMs("ox-commit 10k keys via oxiosd, initial (ms)", time.Since(start), gitInit, "<= 1.0x git add+commit")
	var times []time.Duration
	for round := range 9 {
		for i, p := range changed {
			agent, key, _ := strings.Cut(strings.TrimPrefix(p, "agents/"), "/state/")
			_, err := c.StateSave(context.Background(), agent, key, fmt.Appendf(nil, "daemon round %d, file %d\n", round, i))
			check(err)
		}
		start := time.Now()
		rec, err := c.Commit(context.Background(), proto.CommitArgs{Message: fmt.Sprint("round ", round)})
		check(err)
		times = append(times, time.Since(start))
		if len(rec.Changed) != len(changed) {
			fatal(fmt.Errorf("commit through oxiosd changed %d paths, want %d", len(rec.Changed), len(changed)))
		}
	}
	reportMs("ox-commit 10 of 10k keys via oxiosd, median (ms)", median(times), gitIncr, "<= 0.2x git add+commit")
}

// commitTree is the benchmark's tree: path -> content.
func commitTree() map[string][]byte {
	files := make(map[string][]byte, commitFiles)
	for i := range commitFiles {
		p := fmt.Sprintf("agents/a%02d/state/d%02d/k%05d.md", i%20, i/20%20, i)
		files[p] = fmt.Appendf(nil, "key %d\n%s\n", i, bytes.Repeat([]byte("state "), 15+i%65))
	}
	return files
}

// gitCmd runs git in dir with an identity and no user or system config.
func gitCmd(dir string, args ...string) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@oxios",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@oxios")
	if out, err := cmd.CombinedOutput(); err != nil {
		fatal(fmt.Errorf("git %v: %v\n%s", args, err, out))
	}
}

func median[T cmp.Ordered](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// reportMs is report for durations: the same columns, in milliseconds
// with two decimals (report's whole numbers would round a 3 ms commit).
func reportMs(name string, fig, base time.Duration, target string) {
	f := float64(fig.Microseconds()) / 1000
	b := float64(base.Microseconds()) / 1000
	if b == 0 {
		fmt.Printf("%-46s %14.2f %14s %8s  %s\n", name, f, "", "", target)
		return
	}
	fmt.Printf("%-46s %14.2f %14.2f %7.2fx  %s\n", name, f, b, f/b, target)
}
