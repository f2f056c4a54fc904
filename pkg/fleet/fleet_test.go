package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// chain is a fake kernel holding an audit chain: hash i is hashes[i-1].
type chain struct {
	Kernel
	hashes []string
}

func (c *chain) AuditHead(context.Context, *kernel.Cred) (proto.AuditHead, error) {
	n := len(c.hashes)
	if n == 0 {
		return proto.AuditHead{}, nil
	}
	return proto.AuditHead{Seq: uint64(n), Hash: c.hashes[n-1]}, nil
}

func (c *chain) AuditShow(_ context.Context, _ *kernel.Cred, seq uint64) ([]byte, error) {
	if seq == 0 || seq > uint64(len(c.hashes)) {
		return nil, proto.Errorf(proto.ENOENT, "no audit entry %d", seq)
	}
	return json.Marshal(map[string]any{"seq": seq, "hash": c.hashes[seq-1]})
}

func hashes(n int, from int, tag string) []string {
	h := make([]string, n)
	for i := range h {
		h[i] = fmt.Sprintf("h%d", i+1)
		if i+1 >= from {
			h[i] += tag
		}
	}
	return h
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func heads(h []string, seqs ...uint64) []proto.WitnessHead {
	var out []proto.WitnessHead
	for _, s := range seqs {
		out = append(out, proto.WitnessHead{Seq: s, Hash: h[s-1], Time: time.Now()})
	}
	return out
}

func TestCheckAgainstWitness(t *testing.T) {
	orig := hashes(100, 0, "")
	seen := heads(orig, 10, 40, 70, 100)
	for _, tc := range []struct {
		name        string
		local       []string
		ok          bool
		first, last uint64
		want        string
	}{
		{"intact", orig, true, 0, 100, "match"},
		{"grown", hashes(150, 0, ""), true, 0, 100, "match"},
		// Rewritten from entry 50 and re-hashed: the heads at 70 and 100
		// differ; 40 still matches.
		{"rewritten", hashes(100, 50, "'"), false, 70, 40, "rewritten: entry 70"},
		{"rewritten and grown", hashes(120, 50, "'"), false, 70, 40, "after entry 40"},
		{"truncated", orig[:80], false, 100, 70, "truncated"},
		{"rewritten from the start", hashes(100, 1, "'"), false, 10, 0, "from its first entry on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Fleet{name: "c", k: &chain{hashes: tc.local}}
			rec, err := f.check(context.Background(), witnessAnswer{Witness: "a", Heads: seen})
			if err != nil {
				t.Fatal(err)
			}
			if rec.OK != tc.ok || rec.FirstBad != tc.first || rec.LastGood != tc.last || !strings.Contains(rec.Text, tc.want) {
				t.Fatalf("got ok=%v first_bad=%d last_good=%d %q", rec.OK, rec.FirstBad, rec.LastGood, rec.Text)
			}
			if !tc.ok && (!strings.Contains(rec.Problem, "node a") || !strings.Contains(rec.Problem, "node c")) {
				t.Fatalf("the problem does not name the witness and the node: %q", rec.Problem)
			}
		})
	}
}

func TestWitnessesAlarmAndPersist(t *testing.T) {
	dir := t.TempDir()
	w, err := openWitnesses(dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, ok := w.see("b", proto.WitnessHead{Seq: 5, Hash: "x5", Time: now}); ok {
		t.Fatal("a first head has nothing before it to recheck")
	}
	w.see("b", proto.WitnessHead{Seq: 5, Hash: "x5", Time: now}) // a repeat is not kept twice
	past, ok := w.see("b", proto.WitnessHead{Seq: 9, Hash: "x9", Time: now})
	if !ok || past.Seq != 5 {
		t.Fatalf("a head past the last: recheck %v of %+v", ok, past)
	}
	if a := w.alarm("b"); a != "" {
		t.Fatalf("alarm on heads that follow: %q", a)
	}
	// Same entry, another hash: rewritten.
	w.see("b", proto.WitnessHead{Seq: 9, Hash: "y9", Time: now})
	if a := w.alarm("b"); !strings.Contains(a, "rewritten") || !strings.Contains(a, "entry 9") {
		t.Fatalf("alarm: %q", a)
	}
	// A head that goes back, on another peer.
	w.see("c", proto.WitnessHead{Seq: 9, Hash: "z9", Time: now})
	w.see("c", proto.WitnessHead{Seq: 3, Hash: "z3", Time: now})
	if a := w.alarm("c"); !strings.Contains(a, "went back") {
		t.Fatalf("alarm: %q", a)
	}
	w.close()
	// What was seen survives a restart: heads and alarms.
	w2, err := openWitnesses(dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if got := w2.list("b"); len(got) != 3 || got[0].Seq != 5 || got[2].Hash != "y9" {
		t.Fatalf("heads of b after a restart: %+v", got)
	}
	if w2.alarm("b") == "" || w2.alarm("c") == "" {
		t.Fatal("alarms lost in a restart")
	}
}

func TestThinKeepsOldAndNew(t *testing.T) {
	var h []proto.WitnessHead
	for i := 1; i <= maxHeads+1; i++ {
		h = thin(append(h, proto.WitnessHead{Seq: uint64(i)}))
	}
	if len(h) > maxHeads || h[0].Seq != 1 || h[len(h)-1].Seq != maxHeads+1 {
		t.Fatalf("thinned to %d heads, %d..%d", len(h), h[0].Seq, h[len(h)-1].Seq)
	}
}

func TestWithNode(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"run","id":"r1"}`:         `{"node":"b","type":"run","id":"r1"}`,
		`{}`:                               `{"node":"b"}`,
		` {"a":1} `:                        `{"node":"b","a":1}`,
		`{"node":"x","a":1}`:               `{"node":"x","a":1}`, // a node's own says where it is
		`["not","an","object"]`:            `["not","an","object"]`,
		`{"text":"quote \" and \\ and }"}`: `{"node":"b","text":"quote \" and \\ and }"}`,
		// A run that prints a node field does not choose its node.
		`{"type":"output","text":"{\"node\":\"a\"}"}`: `{"node":"b","type":"output","text":"{\"node\":\"a\"}"}`,
	} {
		got := string(withNode(json.RawMessage(in), "b"))
		if got != want {
			t.Errorf("withNode(%s) = %s, want %s", in, got, want)
		}
		if json.Valid([]byte(in)) && !json.Valid([]byte(got)) {
			t.Errorf("withNode(%s) is not JSON: %s", in, got)
		}
	}
}

// TestFreshAcrossRestart: the ids of calls seen are kept in memory, so a
// node refuses a call made before it started (it cannot know whether it
// saw it), takes one made after, and refuses that one sent again.
func TestFreshAcrossRestart(t *testing.T) {
	tr := &trust{self: "n1", seen: map[string]time.Time{}, since: time.Now()}
	before := tr.since.Add(-time.Second).Add(callTTL).UnixMilli()
	if err := tr.fresh("n1", "old", before); err == nil || !strings.Contains(err.Error(), "before this node started") {
		t.Fatalf("a call made before the start: %v", err)
	}
	after := time.Now().Add(time.Millisecond).Add(callTTL).UnixMilli()
	if err := tr.fresh("n1", "new", after); err != nil {
		t.Fatalf("a call made after the start: %v", err)
	}
	if err := tr.fresh("n1", "new", after); err == nil || !strings.Contains(err.Error(), "seen before") {
		t.Fatalf("the same call again: %v", err)
	}
	if err := tr.fresh("n2", "other", after); err == nil {
		t.Fatal("a call for another node was taken")
	}
}

// TestContribPermissions: the NATS servers of contrib/fleet give each
// node the permissions Permissions names (the integration test's fleet
// runs with those), as fleet-keys prints them.
func TestContribPermissions(t *testing.T) {
	for _, h := range []string{"h1", "h2", "h3"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "contrib", "fleet", "nats-"+h+".conf"))
		if err != nil {
			t.Fatal(err)
		}
		conf := strings.Join(strings.Fields(string(b)), " ")
		for _, n := range []string{"h1", "h2", "h3"} {
			if want := strings.Join(strings.Fields(Permissions(n)), " "); !strings.Contains(conf, want) {
				t.Errorf("nats-%s.conf: node %s's user lacks the permissions\n%s", h, n, Permissions(n))
			}
		}
	}
}
