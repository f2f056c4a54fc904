package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

type memRec struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	Agent     string    `json:"agent"`
	Kind      string    `json:"kind"`
	Text      string    `json:"text"`
	Score     float64   `json:"score"`
	Tags      []string  `json:"tags"`
	Source    string    `json:"source"`
	Created   time.Time `json:"created"`
	Forgotten bool      `json:"forgotten"`
}

func parseMems(t *testing.T, out string) []memRec {
	t.Helper()
	var recs []memRec
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var r memRec
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Type != "memory" {
			t.Fatalf("not a memory record: %q (%v)", l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func texts(recs []memRec) string {
	var s []string
	for _, r := range recs {
		s = append(s, r.Text)
	}
	return strings.Join(s, " | ")
}

func ids(recs []memRec) string {
	var s []string
	for _, r := range recs {
		s = append(s, r.ID)
	}
	return strings.Join(s, ",")
}

// waitFor polls cond: the mem files are written behind the journal, and TTL
// expiry runs on its own timer.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestMemoryCLI(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	one := parseMems(t, d.mustOx(t, "", "ox-remember", "-a", "ops", "--tag", "nginx", "--importance", "0.8", "disk full on /var, nginx stopped writing access logs"))
	if len(one) != 1 || one[0].Kind != "episodic" || len(one[0].ID) != 26 || strings.Join(one[0].Tags, ",") != "nginx" {
		t.Fatalf("remember: %+v", one)
	}
	lines := "the nightly backup runs at 2am and takes an hour\n\n" +
		`{"type":"state","agent":"x","key":"k","value":"the certificate for example.com expires in march","tags":["tls"]}` + "\n" +
		"deploying on friday afternoons caused two outages\n"
	piped := parseMems(t, d.mustOx(t, lines, "ox-remember", "-a", "ops", "--kind", "semantic"))
	if len(piped) != 3 || piped[1].Kind != "semantic" || strings.Join(piped[1].Tags, ",") != "tls" {
		t.Fatalf("remember from stdin: %+v", piped)
	}
	// Recall right after the reply sees the memories, best first.
	got := parseMems(t, d.mustOx(t, "", "ox-recall", "-a", "ops", "disk", "space", "nginx"))
	if len(got) == 0 || got[0].ID != one[0].ID || got[0].Agent != "ops" || got[0].Score <= 0 || !strings.Contains(got[0].Text, "disk full") {
		t.Fatalf("recall: %+v", got)
	}
	if got := parseMems(t, d.mustOx(t, "", "ox-recall", "-a", "ops", "--tag", "tls", "expires")); texts(got) != "the certificate for example.com expires in march" {
		t.Fatalf("recall --tag: %s", texts(got))
	}
	if got := parseMems(t, d.mustOx(t, "backup schedule\n", "ox-recall", "-a", "ops", "--kind", "semantic")); len(got) == 0 || !strings.Contains(got[0].Text, "backup") {
		t.Fatalf("recall from stdin: %+v", got)
	}
	// The records of one command are the input of the next: recalled
	// memories remembered by another agent keep text, kind and tags.
	out := d.mustOx(t, "", "ox-recall", "-a", "ops", "certificate")
	copied := parseMems(t, d.mustOx(t, out, "ox-remember", "-a", "dev"))
	if len(copied) != 1 || copied[0].Kind != "semantic" || strings.Join(copied[0].Tags, ",") != "tls" {
		t.Fatalf("records piped into ox-remember: %+v", copied)
	}
	if got := parseMems(t, d.mustOx(t, "", "ox-recall", "-a", "dev", "certificate")); len(got) != 1 || got[0].Text != "the certificate for example.com expires in march" {
		t.Fatalf("dev's copy: %+v", got)
	}
	// The admin searches every agent.
	if got := parseMems(t, d.mustOx(t, "", "ox-recall", "--all-agents", "certificate")); len(got) != 2 {
		t.Fatalf("--all-agents: %+v", got)
	}
	// Files in the git-tracked tree, front matter + text.
	file := filepath.Join(d.data, "repo", "agents", "ops", "mem", "episodic", one[0].ID+".md")
	waitFor(t, "the memory file", func() bool { _, err := os.Stat(file); return err == nil })
	b, _ := os.ReadFile(file)
	if !strings.HasPrefix(string(b), "---\nid: "+one[0].ID+"\nkind: episodic\ntags: [nginx]\n") || !strings.HasSuffix(string(b), "\n---\ndisk full on /var, nginx stopped writing access logs") {
		t.Fatalf("memory file:\n%s", b)
	}
	// Audited like every syscall: one entry per memory.
	audit := d.mustOx(t, "", "ox-audit", "log", "--op", "mem.remember")
	if n := strings.Count(audit, `"op":"mem.remember"`); n != 5 {
		t.Fatalf("%d mem.remember audit entries, want 5:\n%s", n, audit)
	}
	// Forget by id (records from ox-recall piped in), by tag, by time.
	d.mustOx(t, d.mustOx(t, "", "ox-recall", "-a", "ops", "-k", "1", "friday deploy"), "ox-forget", "-a", "ops")
	if got := parseMems(t, d.mustOx(t, "", "ox-recall", "-a", "ops", "friday", "deploy")); strings.Contains(texts(got), "friday") {
		t.Fatalf("forgotten memory recalled: %s", texts(got))
	}
	if f := parseMems(t, d.mustOx(t, "", "ox-forget", "-a", "ops", "--tag", "tls")); len(f) != 1 || !f[0].Forgotten {
		t.Fatalf("forget --tag: %+v", f)
	}
	if f := parseMems(t, d.mustOx(t, "", "ox-forget", "-a", "ops", "--before", time.Now().Add(time.Minute).UTC().Format(time.RFC3339))); len(f) != 2 {
		t.Fatalf("forget --before: %+v", f)
	}
	waitFor(t, "the file to go", func() bool { _, err := os.Stat(file); return os.IsNotExist(err) })
	// ops held only these memories: with all of them forgotten it holds
	// nothing, and an agent that holds nothing does not exist.
	if r := d.ox("", "ox-forget", "-a", "ops", one[0].ID); r.code != 1 || !strings.Contains(r.stderr, `no agent "ops"`) {
		t.Fatalf("forget of a forgotten id: %+v", r)
	}
}

func TestMemoryBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[limits]\nmax_value = \"1MiB\"\n"})
	d.mustOx(t, "", "ox-remember", "-a", "ops", "first memory")
	for _, c := range []struct {
		name, stdin string
		args        []string
		code        int
		want        string
	}{
		{"empty query", "", []string{"ox-recall", "-a", "ops", "  "}, 2, "query is empty"},
		{"empty query on stdin", "\n", []string{"ox-recall", "-a", "ops"}, 2, "query is empty"},
		{"query of stop words", "", []string{"ox-recall", "-a", "ops", "the", "of"}, 1, "no searchable words"},
		{"non-UTF-8 line", "good line\nbad \xff line\nanother\n", []string{"ox-remember", "-a", "ops"}, 1, "line 2 is not valid UTF-8"},
		{"huge line", "ok\n" + strings.Repeat("x", 2<<20) + "\n", []string{"ox-remember", "-a", "ops"}, 1, "line 2 is longer than"},
		{"bad kind", "", []string{"ox-remember", "-a", "ops", "--kind", "dream", "x"}, 2, "kind \"dream\""},
		{"bad id", "", []string{"ox-forget", "-a", "ops", "nope"}, 2, "want 26 characters"},
		{"no agent", "", []string{"ox-recall", "x"}, 2, "no agent"},
	} {
		r := d.ox(c.stdin, c.args[0], c.args[1:]...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, r.code, r.stderr, c.code, c.want)
		}
	}
	// Nothing of a refused batch was remembered.
	list := 0
	cl := d.client(t)
	if err := cl.MemList(context.Background(), proto.MemListArgs{Agent: "ops"}, func(proto.MemoryRecord) error { list++; return nil }); err != nil || list != 1 {
		t.Fatalf("after refused input: %d memories (%v), want 1", list, err)
	}
	// Over the socket, a bad memory in a batch refuses the batch.
	_, err := cl.MemRemember(context.Background(), proto.MemRememberArgs{Agent: "ops", Memories: []proto.MemoryInput{{Text: "fine"}, {Text: "x", Tags: []string{"Bad Tag"}}}})
	if err == nil || !strings.Contains(err.Error(), "memory 2 of 2") || !strings.Contains(err.Error(), "nothing was remembered") {
		t.Fatalf("bad batch over the socket: %v", err)
	}
	// A 100 MB line on the wire gets a clear error and the connection lives.
	// The line is built before the connection opens: on a loaded machine
	// building it can outlast the daemon's idle timeout.
	huge := `{"id":1,"op":"mem.remember","args":{"agent":"ops","memories":[{"text":"` + strings.Repeat("y", 100<<20) + `"}]}}`
	rc := d.raw(t)
	rc.send(huge)
	if rep := rc.reply(); rep.OK || rep.Error == nil || rep.Error.Code != "EMSGSIZE" {
		t.Fatalf("100 MB request: %+v", rep)
	}
	rc.send(`{"id":2,"op":"mem.recall","args":{"agent":"ops","query":""}}`)
	if rep := rc.reply(); rep.OK || rep.Error == nil || rep.Error.Code != "EINVAL" || !strings.Contains(rep.Error.Message, "empty") {
		t.Fatalf("empty query over the socket: %+v", rep)
	}
	if err := cl.MemList(context.Background(), proto.MemListArgs{Agent: "ops"}, func(proto.MemoryRecord) error { list++; return nil }); err != nil || list != 2 {
		t.Fatalf("after refused batches: %d memories (%v), want 1", list-1, err)
	}
}

func TestMemorySocket(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	cl := d.client(t)
	ctx := context.Background()
	var in []proto.MemoryInput
	for i := 0; i < 500; i++ {
		in = append(in, proto.MemoryInput{Text: fmt.Sprintf("event %d on host%d: service restarted", i, i%7), Tags: []string{fmt.Sprintf("h%d", i%7)}})
	}
	recs, err := cl.MemRemember(ctx, proto.MemRememberArgs{Agent: "ops", Memories: in})
	if err != nil || len(recs) != 500 {
		t.Fatalf("remember 500: %d, %v", len(recs), err)
	}
	var hits []proto.MemoryRecord
	if err := cl.MemRecall(ctx, proto.MemRecallArgs{Agent: "ops", Query: "host3 restarted", K: 5, Tags: []string{"h3"}}, func(r proto.MemoryRecord) error { hits = append(hits, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(hits) != 5 {
		t.Fatalf("recall: %d hits", len(hits))
	}
	for i, h := range hits {
		if !strings.Contains(h.Text, "host3") || i > 0 && h.Score > hits[i-1].Score {
			t.Fatalf("hit %d: %+v", i, h)
		}
	}
	// Another agent's process may not read ops' memories; an unknown
	// selector is refused.
	rc := d.raw(t)
	rc.send(`{"id":3,"op":"mem.recall","args":{"agent":"ops","query":"x","colour":"red"}}`)
	if rep := rc.reply(); rep.OK || rep.Error.Code != "EINVAL" {
		t.Fatalf("unknown field: %+v", rep)
	}
}

func TestMemoryTTL(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[memory]\nworking_ttl = \"2s\"\n"})
	short := parseMems(t, d.mustOx(t, "", "ox-remember", "-a", "ops", "--kind", "working", "scratch note about the rollout"))
	d.mustOx(t, "", "ox-remember", "-a", "ops", "--ttl", "1500ms", "another rollout scratch")
	keep := parseMems(t, d.mustOx(t, "", "ox-remember", "-a", "ops", "--kind", "working", "--ttl", "0", "rollout plan to keep"))
	// (Under the race detector a command can take a second: only the
	// memory without expiry is sure to be there.)
	if got := parseMems(t, d.mustOx(t, "", "ox-recall", "-a", "ops", "rollout")); len(got) == 0 {
		t.Fatalf("before expiry: %+v", got)
	}
	waitFor(t, "expiry", func() bool {
		got := parseMems(t, d.mustOx(t, "", "ox-recall", "-a", "ops", "rollout"))
		return len(got) == 1 && got[0].ID == keep[0].ID
	})
	// Expiry is a forget by the kernel, audited.
	audit := d.mustOx(t, "", "ox-audit", "log", "--op", "mem.forget")
	if !strings.Contains(audit, short[0].ID) || strings.Count(audit, `"result":"ok"`) != 2 {
		t.Fatalf("expiry audit:\n%s", audit)
	}
}

func TestMemoryIndexRebuildRestoreCatchUp(t *testing.T) {
	t.Parallel()
	needGit(t)
	d := startDaemon(t, daemonOpts{})
	var lines []string
	for i := 0; i < 300; i++ {
		lines = append(lines, fmt.Sprintf("note %d about %s and %s", i, []string{"disks", "networks", "certificates", "backups"}[i%4], []string{"alpha", "beta", "gamma"}[i%3]))
	}
	d.mustOx(t, strings.Join(lines, "\n")+"\n", "ox-remember", "-a", "ops", "--batch", "64")
	query := func(d *daemon) string {
		return ids(parseMems(t, d.mustOx(t, "", "ox-recall", "-a", "ops", "-k", "20", "certificates", "gamma")))
	}
	before := query(d)
	if strings.Count(before, ",") != 19 {
		t.Fatalf("recall: %s", before)
	}
	c1 := parseCommit(t, d.mustOx(t, "", "ox-commit", "-a", "ops", "-m", "memories"))
	if !strings.Contains(c1.changed(), "agents/ops/mem/episodic/") {
		t.Fatalf("commit did not take the memories: %s", c1.changed())
	}
	d.stop()

	// Restart with the saved index: same results.
	d = startDaemon(t, daemonOpts{dir: d.dir})
	if got := query(d); got != before {
		t.Fatalf("after restart:\n got %s\nwant %s", got, before)
	}
	d.stop()
	// Without DATA/index the index is rebuilt from the files: same results.
	if err := os.RemoveAll(filepath.Join(d.data, "index")); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, daemonOpts{dir: d.dir})
	if got := query(d); got != before {
		t.Fatalf("after rebuild:\n got %s\nwant %s", got, before)
	}
	if !strings.Contains(d.stderr.String(), "rebuilt=1") {
		t.Fatalf("no rebuild logged:\n%s", d.stderr.String())
	}
	// An index file of an older version is rebuilt, not misread.
	d.stop()
	saved := filepath.Join(d.data, "index", "recall", "ops")
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	copy(b, "OXMEMIX1")
	if err := os.WriteFile(saved, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, daemonOpts{dir: d.dir})
	if got := query(d); got != before {
		t.Fatalf("after rebuilding an old version:\n got %s\nwant %s", got, before)
	}
	if !strings.Contains(d.stderr.String(), "rebuilt=1") || !strings.Contains(d.stderr.String(), "OXMEMIX1") {
		t.Fatalf("no rebuild of the old version logged:\n%s", d.stderr.String())
	}

	// Forget everything, then restore the commit: the memories and the
	// index come back.
	d.mustOx(t, "", "ox-forget", "-a", "ops", "--tag", "x", "--before", "1h") // matches nothing
	d.mustOx(t, "", "ox-forget", "-a", "ops", "--before", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	// An agent that holds nothing does not exist (ox-agents(1)): the recall
	// finds no agent rather than no memory.
	if r := d.ox("", "ox-recall", "-a", "ops", "certificates"); r.stdout != "" || r.code != 0 && !strings.Contains(r.stderr, `no agent "ops"`) {
		t.Fatalf("after forgetting all: %+v", r)
	}
	d.mustOx(t, "", "ox-commit", "restore", "-a", "ops", c1.Commit)
	if got := query(d); got != before {
		t.Fatalf("after restore:\n got %s\nwant %s", got, before)
	}

	// kill -9 right after a remember: the restart catches the index up
	// from the audit log.
	d.stop()
	d = startDaemon(t, daemonOpts{dir: d.dir})
	late := parseMems(t, d.mustOx(t, "", "ox-remember", "-a", "ops", "zebra crossing painted yesterday"))
	d.kill9()
	d = startDaemon(t, daemonOpts{dir: d.dir})
	got := parseMems(t, d.mustOx(t, "", "ox-recall", "-a", "ops", "zebra"))
	if len(got) != 1 || got[0].ID != late[0].ID {
		t.Fatalf("after kill -9: %+v", got)
	}
	if !strings.Contains(d.stderr.String(), "caught up") {
		t.Fatalf("no catch-up logged:\n%s", d.stderr.String())
	}
	d.mustOx(t, "", "ox-audit", "verify")
}
