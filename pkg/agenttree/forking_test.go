package agenttree

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// A fork at a commit: one commit grafting a's folder as b, its files
// handed to the batch with the fork's entry, the record naming both; a
// taken name refused and audited before anything is made; a batch that
// fails drops the fork's commit, which never reaches HEAD.
func TestForker(t *testing.T) {
	dir := t.TempDir()
	r, paths, _, err := version.OpenWork(filepath.Join(dir, "repo"), filepath.Join(dir, "uncommitted"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := live{"agents/a/state/k": []byte("v\n"), "agents/a/state/d/j": []byte("w\n"), "agents/a/sys/budget.json": []byte(`{"used":{"tokens":5}}` + "\n")}
	paths.Mark("agents/a/state/k", "agents/a/state/d/j", "agents/a/sys/budget.json")
	w := &version.Work{Repo: r, Paths: paths, State: st, Rescan: func() error { return nil }, Head: func() (uint64, string) { return 7, strings.Repeat("ab", 32) }}
	var audited []string
	au := func(op, target, result, event string, data any) (uint64, error) {
		audited = append(audited, op+" "+target+" "+result)
		return uint64(len(audited)), nil
	}
	if _, err := w.Commit(proto.CommitArgs{Agent: "a"}, 0, "", au); err != nil {
		t.Fatal(err)
	}
	var applied []*state.Change
	var entry *audit.Entry
	var fail error
	forked := ""
	f := &Forker{W: w, Log: slog.Default(),
		Exists: func(agent string) bool { return len(st.keys(state.Ref(state.SpaceState, agent))) > 0 },
		Keys:   st.Keys,
		CommitFirst: func(agent, message string) error {
			t.Errorf("a fork at a commit committed %s first", agent)
			return nil
		},
		Apply: func(e *audit.Entry, name string, fork *state.Fork, data map[string]string, changes []*state.Change, commit []byte) error {
			if fork != nil || !strings.HasPrefix(e.Target, name+":fork a") || data["from"] != "a" {
				t.Errorf("batch of %s: fork %v, data %v", name, fork, data)
			}
			// The fork's commit rides in the batch, and is not the
			// branch's before the batch stands.
			if !version.IsCommitRecord(commit) {
				t.Errorf("batch of %s: no commit record (%q)", name, commit)
			}
			if taken, err := InHead(r, name); taken || err != nil {
				t.Errorf("%s is in HEAD before its batch is durable (%v)", name, err)
			}
			entry, applied = e, changes
			if fail != nil {
				return fail
			}
			for _, ch := range changes {
				st[version.SpacePath(ch.Space, ch.Agent, ch.Key)] = ch.Value
			}
			return nil
		},
		Forked: func(name string, live bool) { forked = name },
	}
	table := jobs.NewTable(jobs.Hooks{})
	fork := func(name string) (proto.ForkRecord, error) {
		held := table.Lock()
		defer held.Unlock()
		return f.Fork(proto.ForkArgs{Agent: "a", Name: name, Rev: "HEAD"}, []byte("{}"), audit.Actor{UID: 0}, 0, "", held, au)
	}
	rec, err := fork("b")
	if err != nil {
		t.Fatal(err)
	}
	head, _ := r.Resolve("HEAD")
	if rec.Commit != head || rec.From != "a" || rec.Agent != "b" || rec.Files != 3 || forked != "b" || !strings.HasPrefix(entry.Target, "b:fork a at ") {
		t.Fatalf("record %+v (forked %q, entry %+v)", rec, forked, entry)
	}
	if len(applied) != 3 {
		t.Errorf("the fork's files: %+v", applied)
	}
	for _, ch := range applied {
		if ch.Space == state.SpaceSys && strings.Contains(string(ch.Value), `"tokens":5`) {
			t.Errorf("the fork's budget kept what a used: %s", ch.Value)
		}
	}
	cm, _ := r.Show(head)
	if len(cm.Trailers) < 2 || cm.Trailers[0] != (version.Trailer{Key: version.TrailerForkOf, Value: "a"}) || cm.Trailers[1].Value != rec.Point {
		t.Errorf("fork commit's trailers: %+v", cm.Trailers)
	}
	if taken, _ := InHead(r, "b"); !taken {
		t.Error("b is not in HEAD")
	}
	// b exists now: refused, audited, nothing made.
	if _, err := fork("b"); proto.AsError(err).Code != proto.EEXIST || !strings.HasSuffix(audited[len(audited)-1], "b:fork a EEXIST") {
		t.Fatalf("%v %q", err, audited)
	}
	if h, _ := r.Resolve("HEAD"); h != head {
		t.Error("a refused fork made a commit")
	}
	// A batch that fails drops the prepared commit.
	fail = errors.New("disk gone")
	if _, err := fork("c"); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("failed batch: %v", err)
	}
	if taken, _ := InHead(r, "c"); taken {
		t.Error("the graft of a failed fork stayed")
	}
}

// A fork's entry replayed at start has the next commit compare
// everything with HEAD; other entries do not.
func TestForkReplayed(t *testing.T) {
	var lost lostPaths
	ForkReplayed(proto.OpStateSave, "ok", &lost)
	ForkReplayed(proto.OpAgentFork, "EEXIST", &lost)
	if lost {
		t.Fatal("lost by another entry")
	}
	ForkReplayed(proto.OpAgentFork, "ok", &lost)
	if !lost {
		t.Fatal("a fork's entry did not lose the paths")
	}
}

type lostPaths bool

func (l *lostPaths) Lost() { *l = true }
