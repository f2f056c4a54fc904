package version

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// audited is one entry a Work gave its Auditor.
type audited struct {
	op, target, result, event string
	data                      any
}

// testWork is a Work on a new repository whose Apply stores the
// changes in st, and the entries an Auditor was given.
func testWork(t *testing.T, st memStore) (*Work, *[]audited, Auditor) {
	t.Helper()
	dir := t.TempDir()
	r, paths, _, err := OpenWork(filepath.Join(dir, "repo"), filepath.Join(dir, "uncommitted"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	seq := uint64(10)
	w := &Work{Repo: r, Paths: paths, State: st, Rescan: func() error { return nil },
		Head: func() (uint64, string) { return seq, "headhash" },
		Apply: func(chs []*state.Change, es []*audit.Entry) []error {
			for i, ch := range chs {
				p := SpacePath(ch.Space, ch.Agent, ch.Key)
				if ch.Delete {
					delete(st, p)
				} else {
					st[p] = ch.Value
				}
				seq++
				es[i].Seq = seq
				paths.Mark(p)
			}
			return make([]error, len(chs))
		}}
	var got []audited
	au := func(op, target, result, event string, data any) (uint64, error) {
		got = append(got, audited{op, target, result, event, data})
		seq++
		return seq, nil
	}
	return w, &got, au
}

func TestWorkCommitAndTag(t *testing.T) {
	st := memStore{"agents/a/state/k": []byte("v\n")}
	w, got, au := testWork(t, st)
	w.Paths.Mark("agents/a/state/k")
	rec, err := w.Commit(proto.CommitArgs{Agent: "a", Message: "first", Tag: "v1"}, 1000, "", au)
	if err != nil || rec.Commit == "" || rec.AuditSeq != 11 || len(rec.Tags) != 1 {
		t.Fatalf("%+v %v", rec, err)
	}
	if len(*got) != 1 || (*got)[0].op != proto.OpCommit || (*got)[0].target != "a:"+rec.Commit || (*got)[0].event != "commit.created" {
		t.Fatalf("audited %+v", *got)
	}
	cm, _ := w.Repo.Show(rec.Commit)
	if want := AuditTrailers(10, "headhash"); !slices.Equal(cm.Trailers, want) {
		t.Errorf("trailers %v", cm.Trailers)
	}
	// Nothing uncommitted: nothing recorded.
	none, err := w.Commit(proto.CommitArgs{}, 1000, "", au)
	if err != nil || none.Commit != rec.Commit || none.Message != "nothing to commit" || len(*got) != 1 {
		t.Fatalf("%+v %v, audited %d", none, err, len(*got))
	}
	// A tag of HEAD, and a refused one.
	if tr, err := w.Tag("v2", "HEAD", au); err != nil || tr.Commit != rec.Commit || (*got)[1].target != "*:v2" || (*got)[1].event != "commit.tagged" {
		t.Fatalf("%+v %v %+v", tr, err, *got)
	}
	if _, err := w.Tag("v3", "nope", au); err == nil || (*got)[2].result != proto.Result(err) || (*got)[2].result == "ok" {
		t.Fatalf("%v %+v", err, *got)
	}
	// A tag of no revision names HEAD; a blank message is the default.
	if tr, err := w.Tag("v4", "", au); err != nil || tr.Commit != rec.Commit {
		t.Fatalf("%+v %v", tr, err)
	}
	st["agents/a/state/k"] = []byte("w\n")
	w.Paths.Mark("agents/a/state/k")
	if blank, err := w.Commit(proto.CommitArgs{Message: "  \n"}, 1000, "", au); err != nil || strings.TrimSpace(blank.Message) == "" {
		t.Fatalf("%+v %v", blank, err)
	}
	n := len(*got)
	// A rescan that fails fails the commit, audited.
	w.Rescan = func() error { return errors.New("boom") }
	if _, err := w.Commit(proto.CommitArgs{Agent: "a"}, 1000, "", au); err == nil || (*got)[n].target != "a" || (*got)[n].result != proto.EIO {
		t.Fatalf("%v %+v", err, (*got)[n])
	}
}

func TestWorkRestore(t *testing.T) {
	st := memStore{"agents/a/state/k": []byte("1\n")}
	w, got, au := testWork(t, st)
	w.Paths.Mark("agents/a/state/k")
	one, err := w.Commit(proto.CommitArgs{Agent: "a"}, 1000, "", au)
	if err != nil {
		t.Fatal(err)
	}
	st["agents/a/state/k"], st["agents/a/state/new"] = []byte("2\n"), []byte("n\n")
	w.Paths.Mark("agents/a/state/k", "agents/a/state/new")
	if _, err := w.Commit(proto.CommitArgs{Agent: "a"}, 1000, "", au); err != nil {
		t.Fatal(err)
	}
	who := audit.Actor{UID: 1000}
	rec, err := w.Restore(proto.CommitRestoreArgs{Agent: "a", Rev: one.Commit}, who, 1000, "", au)
	if err != nil || rec.Commit == "" || string(st["agents/a/state/k"]) != "1\n" || st["agents/a/state/new"] != nil {
		t.Fatalf("%+v %v %v", rec, err, st)
	}
	if last := (*got)[len(*got)-1]; last.op != proto.OpCommit || rec.Message != RestoreMessage("a", one.Commit, one.Commit) {
		t.Errorf("%+v %q", last, rec.Message)
	}
	// An unknown revision is refused, audited as the restore.
	if _, err := w.Restore(proto.CommitRestoreArgs{Agent: "a", Rev: "nope"}, who, 1000, "", au); err == nil || (*got)[len(*got)-1].op != proto.OpCommitRestore || (*got)[len(*got)-1].target != "a:nope" {
		t.Fatalf("%v %+v", err, (*got)[len(*got)-1])
	}
	// The state saved back to HEAD's and restored: no commit, but the
	// record says what changed, with the last change's seq.
	st["agents/a/state/k"] = []byte("x\n")
	w.Paths.Mark("agents/a/state/k")
	n := len(*got)
	rec, err = w.Restore(proto.CommitRestoreArgs{Agent: "a", Rev: "HEAD"}, who, 1000, "", au)
	if err != nil || rec.AuditSeq == 0 || len(rec.Changed) != 1 || len(*got) != n {
		t.Fatalf("%+v %v", rec, err)
	}
}

func TestWorkDiff(t *testing.T) {
	st := memStore{"agents/a/state/k": []byte("1\n")}
	w, _, au := testWork(t, st)
	w.Paths.Mark("agents/a/state/k")
	one, err := w.Commit(proto.CommitArgs{Agent: "a"}, 1000, "", au)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Diff(proto.CommitDiffArgs{}, nil); err == nil {
		t.Fatal("a diff from nothing")
	}
	st["agents/a/state/k"] = []byte("2\n")
	w.Paths.Mark("agents/a/state/k")
	barriers := 0
	barrier := func(fn func()) error { barriers++; fn(); return nil }
	out, err := w.Diff(proto.CommitDiffArgs{From: one.Commit}, barrier)
	if err != nil || barriers != 1 || len(out) != 1 || out[0].Path != "agents/a/state/k" {
		t.Fatalf("%+v %v (barriers %d)", out, err, barriers)
	}
	// Between commits: no barrier.
	if out, err := w.Diff(proto.CommitDiffArgs{From: one.Commit, To: one.Commit}, barrier); err != nil || len(out) != 0 || barriers != 1 {
		t.Fatalf("%+v %v (barriers %d)", out, err, barriers)
	}
	stop := errors.New("stopping")
	if _, err := w.Diff(proto.CommitDiffArgs{From: one.Commit}, func(func()) error { return stop }); err != stop {
		t.Fatalf("the barrier's error: %v", err)
	}
}

func TestWorkPush(t *testing.T) {
	st := memStore{"agents/a/state/k": []byte("v\n")}
	w, got, au := testWork(t, st)
	if _, err := w.Push(context.Background(), "-oProxyCommand=x", au); err == nil || len(*got) != 0 {
		t.Fatalf("a bad remote: %v, audited %+v", err, *got)
	}
	remote := t.TempDir()
	if _, err := gogit.PlainInit(remote, true); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Push(context.Background(), remote, au); err == nil || (*got)[0].target != "*:"+remote || (*got)[0].result != proto.ENOENT {
		t.Fatalf("a push of nothing: %v %+v", err, *got)
	}
	w.Paths.Mark("agents/a/state/k")
	one, err := w.Commit(proto.CommitArgs{}, 1000, "", au)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := w.Push(context.Background(), remote, au)
	last := (*got)[len(*got)-1]
	if err != nil || rec.Commit != one.Commit || last.op != proto.OpVersionPush || last.target != "*:"+remote+" "+one.Commit || last.result != "ok" {
		t.Fatalf("%+v %v %+v", rec, err, last)
	}
}
