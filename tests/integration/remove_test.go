package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// TestRemoveLargeAgentKilled: an agent too large for one batch is removed
// in groups (issue 45); oxiosd killed with SIGKILL in the middle of it
// restarts with the agent whole or gone, its inbox with it, never partly
// removed: a removal cut short is finished at start.
func TestRemoveLargeAgentKilled(t *testing.T) {
	t.Parallel()
	const mems, keys = 1500, 40
	ctx := context.Background()
	dir := shortTempDir(t)
	outcomes := map[string]int{}
	for round := range 3 {
		agent := fmt.Sprintf("big%d", round)
		d := startDaemon(t, daemonOpts{dir: dir})
		c := d.client(t)
		for done := 0; done < mems; done += 500 {
			var in []proto.MemoryInput
			for j := range 500 {
				in = append(in, proto.MemoryInput{Text: fmt.Sprintf("memory %d", done+j)})
			}
			if _, err := c.MemRemember(ctx, proto.MemRememberArgs{Agent: agent, Memories: in}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range keys {
			if _, err := c.StateSave(ctx, agent, fmt.Sprintf("k%d", i), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.MsgSend(ctx, proto.MsgSendArgs{To: agent, Text: "hello"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			rc, err := d.clientNoCleanup()
			if err != nil {
				done <- err
				return
			}
			defer rc.Close()
			_, err = rc.AgentRemove(ctx, agent)
			done <- err
		}()
		if round < 2 {
			// Killed while its groups go: once its mark is there
			// (DATA/index/removing/NAME), a group or more may be.
			mark := filepath.Join(d.data, "index", "removing", agent)
			for deadline := time.Now().Add(2 * time.Minute); ; {
				if _, err := os.Stat(mark); err == nil {
					break
				}
				if len(done) > 0 {
					break // ended before a poll saw its mark
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: no mark %s in 2 minutes of the removal", round, mark)
				}
				time.Sleep(200 * time.Microsecond)
			}
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(10+rand.IntN(120)) * time.Millisecond)
		}
		d.kill9()
		acked := <-done == nil
		d = startDaemon(t, daemonOpts{dir: dir})
		c = d.client(t)
		rec, err := c.AgentShow(ctx, agent)
		n := 0
		c.MemList(ctx, proto.MemListArgs{Agent: agent}, func(proto.MemoryRecord) error { n++; return nil })
		k := 0
		c.StateList(ctx, agent, "", func(proto.StateRecord) error { k++; return nil })
		m := 0
		c.MsgList(ctx, proto.MsgListArgs{Agent: agent, Peek: true}, func(proto.MsgRecord) error { m++; return nil })
		switch {
		case n == 0 && k == 0 && m == 0 && (err != nil || rec.Memories == 0 && rec.Keys == 0):
			outcomes["gone"]++
			if strings.Contains(d.stderr.String(), "cut short by a crash: finishing it") {
				outcomes["finished at start"]++
			}
		case !acked && round >= 2 && n == mems && k == keys && m == 1:
			// Killed before its mark was durable: untouched.
			outcomes["whole"]++
		default:
			t.Fatalf("round %d: after a kill during its removal (acknowledged: %v), %s holds %d of %d memories, %d of %d keys, %d messages (%+v, %v)", round, acked, agent, n, mems, k, keys, m, rec, err)
		}
		d.stop()
	}
	t.Logf("outcomes: %v", outcomes)
}

// clientNoCleanup dials d for a goroutine that outlives the daemon.
func (d *daemon) clientNoCleanup() (*client.Client, error) {
	return client.Dial(context.Background(), d.sock)
}

// TestForgetManyKilled: a forget of more memories than one group holds
// (memindex.ForgetChunk, 512) goes in groups, each durable on its own; a
// kill -9 between them must not leave it half done: its mark
// (DATA/index/forgetting) makes the next start finish it, by the same
// caller, audited, and memories outside it stay.
func TestForgetManyKilled(t *testing.T) {
	t.Parallel()
	const mems, keep = 6000, 50
	ctx := context.Background()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	for done := 0; done < mems+keep; done += 1000 {
		var in []proto.MemoryInput
		for j := range min(1000, mems+keep-done) {
			tag := "old"
			if done+j >= mems {
				tag = "keep"
			}
			in = append(in, proto.MemoryInput{Text: fmt.Sprintf("memory %d", done+j), Tags: []string{tag}})
		}
		if _, err := c.MemRemember(ctx, proto.MemRememberArgs{Agent: "fm", Memories: in}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		rc, err := d.clientNoCleanup()
		if err != nil {
			done <- err
			return
		}
		defer rc.Close()
		err = rc.MemForget(ctx, proto.MemForgetArgs{Agent: "fm", Tags: []string{"old"}}, func(proto.MemoryRecord) error { return nil })
		done <- err
	}()
	// Killed once its mark is there and its groups have begun: the
	// audit log's last entry is one of the forget's.
	marks := filepath.Join(d.data, "index", "forgetting")
	forgot := func(c *client.Client) int {
		n := 0
		c.AuditLog(ctx, proto.AuditLogArgs{Agent: "fm", Op: "mem.forget"}, func(line json.RawMessage) error {
			if bytes.Contains(line, []byte(`"result":"ok"`)) {
				n++
			}
			return nil
		})
		return n
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if ents, _ := os.ReadDir(marks); len(ents) > 0 && forgot(c) > 0 {
			break
		}
		if len(done) > 0 {
			t.Fatalf("the forget of %d memories ended (%v) before the test saw its mark and a group: nothing to kill", mems, <-done)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mark in %s in 2 minutes of the forget", marks)
		}
		time.Sleep(time.Millisecond)
	}
	d.kill9()
	<-done
	d = startDaemon(t, daemonOpts{dir: dir})
	if !strings.Contains(d.stderr.String(), "a forget was cut short by a crash: finishing it") {
		t.Errorf("the start after the kill did not say it finished the forget:\n%s", d.stderr.String())
	}
	c = d.client(t)
	tags := map[string]int{}
	if err := c.MemList(ctx, proto.MemListArgs{Agent: "fm"}, func(m proto.MemoryRecord) error {
		tags[strings.Join(m.Tags, ",")]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if tags["old"] != 0 || tags["keep"] != keep {
		t.Fatalf("after a kill -9 during the forget of %d memories and a restart, the agent holds %v; want none tagged old and all %d tagged keep", mems, tags, keep)
	}
	if ents, _ := os.ReadDir(marks); len(ents) != 0 {
		t.Errorf("the forget's mark is still there after the start finished it: %v", ents)
	}
	// Every memory forgotten has its entry, by the caller, not the daemon.
	if err := c.AuditLog(ctx, proto.AuditLogArgs{Agent: "fm", Op: "mem.forget"}, func(line json.RawMessage) error {
		var e struct{ Actor struct{ PID int } }
		json.Unmarshal(line, &e)
		if e.Actor.PID == d.cmd.Process.Pid {
			return fmt.Errorf("a forget's entry finished at start names the daemon, not the caller: %s", line)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := forgot(c); n != mems {
		t.Errorf("the audit log has %d mem.forget entries, want one per memory forgotten (%d)", n, mems)
	}
}
