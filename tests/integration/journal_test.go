package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startRefused runs oxiosd on dir expecting it to refuse to start for
// damaged data (exit 65, EX_DATAERR), and returns what it said.
func startRefused(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{"--data", filepath.Join(dir, "data"), "--socket", filepath.Join(dir, "oxiosd.sock"), "--no-mount", "--config", ""}, args...)
	var errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin("oxiosd"), all...)
	cmd.Stderr = &errb
	err := cmd.Run()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("oxiosd started (or hung: %v) on damaged data; stderr:\n%s", ctx.Err(), errb.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 65 {
		t.Errorf("oxiosd refused damaged data with exit %d, want 65 (EX_DATAERR); stderr:\n%s", code, errb.String())
	}
	return errb.String()
}

// saveAll saves n keys k000.. of agent, each acknowledged, with values
// easy to find in the journal.
func saveAll(t *testing.T, d *daemon, agent string, n int) {
	t.Helper()
	c := d.client(t)
	for i := range n {
		if _, err := c.StateSave(context.Background(), agent, fmt.Sprintf("k%03d", i), []byte(fmt.Sprintf("value-%03d-%s", i, strings.Repeat("x", 200)))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJournalDeleted: a journal deleted after a crash, with the audit
// log holding entries of saves it held, is noticed: oxiosd refuses to
// start, naming the saves audited but absent and the recovery; with
// --recover it starts and the audit log records what was lost.
func TestJournalDeleted(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	saveAll(t, d, "ann", 3)
	d.stop() // a checkpoint: the journal starts empty
	d = startDaemon(t, daemonOpts{dir: dir})
	saveAll(t, d, "bob", 20)
	d.kill9()
	// The applier may have written some files: those saves are not lost.
	if err := os.Remove(filepath.Join(dir, "data", "journal", "wal")); err != nil {
		t.Fatal(err)
	}
	out := startRefused(t, dir)
	for _, want := range []string{"not in the journal", "state.save bob:k", "oxiosd --recover"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "repo", "agents", "bob", "state", "k019")); err != nil && !absentNamed(out, "bob:k019") {
		t.Errorf("the last save, absent, is not named as such:\n%s", out)
	}
	// Refused again: the refusal changed nothing.
	startRefused(t, dir)
	d = startDaemon(t, daemonOpts{dir: dir, args: []string{"--recover"}})
	log := d.mustOx(t, "", "ox-audit", "log", "--op", "journal.recover")
	if !strings.Contains(log, "journal.recover") {
		t.Errorf("no journal.recover entry in the audit log: %q", log)
	}
	if r := d.ox("", "ox-state", "load", "-a", "ann", "k002"); r.code != 0 {
		t.Errorf("a save checkpointed before is gone: %+v", r)
	}
	d.stop()
	// Accepted: the next start is a normal one.
	d = startDaemon(t, daemonOpts{dir: dir})
	d.stop()
}

// TestJournalFlippedByte: one byte flipped in the middle of the journal,
// intact batches after it: oxiosd refuses to start, naming the damage;
// with --recover it keeps every intact record (the saves after the
// damage among them) and audits the loss.
func TestJournalFlippedByte(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	saveAll(t, d, "ann", 120)
	d.kill9()
	wal := filepath.Join(dir, "data", "journal", "wal")
	b, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("value-060-"))
	if at < 0 {
		t.Fatal("save 60 not found in the journal")
	}
	f, err := os.OpenFile(wal, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{b[at+12] ^ 0x40}, int64(at+12))
	f.Close()
	out := startRefused(t, dir)
	for _, want := range []string{"journal damaged in the middle", "intact records", "oxiosd --recover"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	d = startDaemon(t, daemonOpts{dir: dir, args: []string{"--recover"}})
	if _, err := os.Stat(filepath.Join(dir, "data", "repo", "agents", "ann", "state", "k060")); err != nil && !absentNamed(d.stderr.String(), "ann:k060") {
		t.Errorf("the save lost with the damage is not named audited but absent:\n%s", d.stderr.String())
	}
	c := d.client(t)
	for i := 61; i < 120; i++ {
		k := fmt.Sprintf("k%03d", i)
		if v, _, err := c.StateLoad(context.Background(), "ann", k); err != nil || !strings.HasPrefix(string(v), fmt.Sprintf("value-%03d-", i)) {
			t.Errorf("%s after the damage, not salvaged: %.20q %v", k, v, err)
		}
	}
	log := d.mustOx(t, "", "ox-audit", "log", "--op", "journal.recover")
	if !strings.Contains(log, "journal.recover") {
		t.Errorf("no journal.recover entry in the audit log: %q", log)
	}
	d.stop()
	d = startDaemon(t, daemonOpts{dir: dir})
	d.stop()
}

// absentNamed reports whether out names the save of target as audited
// but absent from the state.
func absentNamed(out, target string) bool {
	_, after, ok := strings.Cut(out, "audited but absent from the state: ")
	return ok && strings.Contains(after, "state.save "+target)
}
