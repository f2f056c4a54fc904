package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// benchAuthorize measures the policy half of the authorize step: the same
// syscall (state.load of a 100-byte value, in-process, as a run of the
// agent) under an allow-all policy and under a policy of 24 key patterns
// whose match is the last, in the same run.
func benchAuthorize(dir string) {
	cfg := config.Default()
	cfg.Data = filepath.Join(dir, "authz")
	cfg.Policies = filepath.Join(dir, "authz-policies")
	cfg.NoMount = true
	k, err := kernel.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	check(err)
	defer k.Close()
	ctx := context.Background()
	admin := &kernel.Cred{UID: 0, Admin: true}
	var pats []string
	for i := 0; i < 23; i++ {
		pats = append(pats, fmt.Sprintf(`"area%d/**/*.md"`, i))
	}
	pats = append(pats, `"notes/**"`)
	strict := "[state]\nread = [" + strings.Join(pats, ", ") + "]\nwrite = [\"notes/**\"]\n[memory]\nkinds = [\"episodic\"]\n"
	for agent, text := range map[string]string{"open": "[state]\nread = [\"**\"]\nwrite = [\"**\"]\n", "strict": strict} {
		_, err := k.PolicySet(ctx, admin, proto.PolicySetArgs{Agent: agent, Text: text}, nil)
		check(err)
		_, err = k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: agent, Key: "notes/a/b/today", Value: strings.Repeat("x", 100)}, nil)
		check(err)
	}
	load := func(agent string, n int) time.Duration {
		c := &kernel.Cred{UID: 1000, Agent: agent, Run: "bench"}
		a := proto.StateArgs{Agent: agent, Key: "notes/a/b/today"}
		start := time.Now()
		for i := 0; i < n; i++ {
			if _, _, err := k.StateLoad(ctx, c, a, nil); err != nil {
				fatal(err)
			}
		}
		return time.Since(start) / time.Duration(n)
	}
	const n = 300000
	load("open", n/10) // warm up
	load("strict", n/10)
	var open, strictT time.Duration
	for r := 0; r < 3; r++ { // interleaved, best of 3
		o, s := load("open", n), load("strict", n)
		if r == 0 || o < open {
			open = o
		}
		if r == 0 || s < strictT {
			strictT = s
		}
	}
	fmt.Printf("%-46s %14.3f %14s %8s  %s\n", "baseline: state.load, allow-all policy (us)", us(open), "", "", "")
	fmt.Printf("%-46s %14.3f %14.3f %7.2fx  %s\n", "state.load, 24-pattern policy (us)", us(strictT), us(open), float64(strictT)/float64(open), "")
	fmt.Printf("%-46s %14.3f %14s %8s  %s\n", "authorize cost over allow-all (us/syscall)", us(strictT-open), "", "", "<= 2 us")
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
