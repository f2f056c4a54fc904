package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// A pipeline of saves, loads and deletes on one connection to a real
// oxiosd: each call gets its own answer, a refused call fails alone and
// is audited, and every save is durable and audited.
func TestPipelineThroughDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 600
	key := func(i int) string { return fmt.Sprintf("p/%03d", i) }
	p := c.Pipeline()
	var saves []*client.Pending
	for i := range n {
		k := key(i)
		if i == 300 {
			k = "p/.git/config" // git reserves it: EINVAL, for this call only
		}
		saves = append(saves, p.StateSave("ops", k, fmt.Appendf(nil, "value %d", i)))
	}
	if err := p.Send(); err != nil {
		t.Fatal(err)
	}
	for i, pd := range saves {
		rec, err := pd.State(ctx)
		if i == 300 {
			if errCode(err) != proto.EINVAL {
				t.Fatalf("save of a reserved key: %v", err)
			}
			continue
		}
		if err != nil || rec.Key != key(i) || rec.Size != int64(len(fmt.Sprint("value ", i))) {
			t.Fatalf("save %d: %+v %v", i, rec, err)
		}
	}
	// The loads, in one run with a key that does not exist.
	var loads []*client.Pending
	for i := range n {
		loads = append(loads, p.StateLoad("ops", key(i)))
	}
	if err := p.Send(); err != nil {
		t.Fatal(err)
	}
	for i, pd := range loads {
		v, _, err := pd.Value(ctx)
		if i == 300 {
			if errCode(err) != proto.ENOENT {
				t.Fatalf("load of a key never saved: %q %v", v, err)
			}
			continue
		}
		if err != nil || string(v) != fmt.Sprint("value ", i) {
			t.Fatalf("load %d: %q %v", i, v, err)
		}
	}
	// The audit log holds every save and the refusal (a refusal is
	// committed without its caller waiting: looked for until it is in).
	var ok, refused int
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok, refused, err = countSaves(ctx, c)
		if err != nil || refused > 0 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || ok != n-1 || refused != 1 {
		t.Fatalf("audit log: %d saves, %d refusals (%v), want %d and 1", ok, refused, err, n-1)
	}
}

// countSaves counts the state.save entries of the audit log: those that
// succeeded, and the refusals of a git-reserved key.
func countSaves(ctx context.Context, c *client.Client) (ok, refused int, err error) {
	err = c.AuditLog(ctx, proto.AuditLogArgs{}, func(item json.RawMessage) error {
		var e struct{ Op, Result, Target string }
		if err := json.Unmarshal(item, &e); err != nil {
			return err
		}
		switch {
		case e.Op == proto.OpStateSave && e.Result == "ok":
			ok++
		case e.Op == proto.OpStateSave && e.Result == proto.EINVAL && strings.Contains(e.Target, ".git/config"):
			refused++
		}
		return nil
	})
	return ok, refused, err
}

// ox-state rm of many keys, piped from ox-state ls as the man page shows:
// every key is deleted and printed in order, and a key that fails is
// reported without stopping the others.
func TestStateRmMany(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ctx := context.Background()
	p := c.Pipeline()
	const n = 1000
	var ps []*client.Pending
	for i := range n {
		ps = append(ps, p.StateSave("ops", fmt.Sprintf("tmp/%04d", i), []byte("x")))
	}
	ps = append(ps, p.StateSave("ops", "keep", []byte("k")))
	if err := p.Send(); err != nil {
		t.Fatal(err)
	}
	for _, pd := range ps {
		if _, err := pd.State(ctx); err != nil {
			t.Fatal(err)
		}
	}
	listed := d.mustOx(t, "", "ox-state", "ls", "-a", "ops", "tmp", "--json")
	out := d.mustOx(t, listed, "ox-state", "rm", "-a", "ops", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		t.Fatalf("rm printed %d records, want %d", len(lines), n)
	}
	for i, l := range lines {
		var rec proto.StateRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Key != fmt.Sprintf("tmp/%04d", i) || !rec.Deleted {
			t.Fatalf("record %d: %s (%v)", i, l, err)
		}
	}
	if left := d.mustOx(t, "", "ox-state", "ls", "-a", "ops", "--json"); strings.Count(left, "\n") != 1 || !strings.Contains(left, `"keep"`) {
		t.Fatalf("left after rm: %s", left)
	}
	// A missing key among others: reported, the others deleted, exit 1.
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "a", "1")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "b", "2")
	r := d.ox("", "ox-state", "rm", "-a", "ops", "a", "nope", "b")
	if r.code != 1 || !strings.Contains(r.stderr, "nope") || strings.Count(r.stdout, "deleted") != 2 {
		t.Fatalf("rm with a missing key: %+v", r)
	}
}
