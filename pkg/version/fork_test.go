package version

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

func TestForkGraftsAndFindsItsPoint(t *testing.T) {
	r := open(t)
	point := change(t, r, map[string][]byte{"agents/a/state/k": []byte("v\n"), "agents/a/sys/budget.json": []byte("{}")}, "one").Hash
	trailers := append([]Trailer{{Key: TrailerForkOf, Value: "a"}, {Key: TrailerForkPoint, Value: point}}, AuditTrailers(3, "h")...)
	after := []PathChange{{Path: "agents/b/sys/budget.json", Action: Modified, To: `{"used":{}}`}}
	cm, err := r.Fork(ForkOptions{From: "a", Name: "b", Point: point, After: func() []PathChange { return after }, Trailers: trailers, Author: opts("").Author, When: testTime})
	if err != nil {
		t.Fatal(err)
	}
	// One commit: the graft, with the fork's own changes below it.
	if !strings.HasPrefix(cm.Message, "Fork a at "+point[:12]+" as b") || len(cm.Trailers) != 4 || cm.Parent != point {
		t.Fatalf("%+v", cm)
	}
	if len(cm.Changed) != 2 || cm.Changed[0].Path != "agents/b" || cm.Changed[0].Action != Added ||
		cm.Changed[1].Path != "agents/b/sys/budget.json" || cm.Changed[1].Action != Modified || cm.Changed[1].From != BlobHash([]byte("{}")) {
		t.Fatalf("changes %+v", cm.Changed)
	}
	if !maps.Equal(lsTree(t, r.Dir(), "HEAD"), mustFiles(t, r, "HEAD", "")) {
		t.Fatal("git ls-tree differs from the fork commit's files")
	}
	// A change outside the fork's folder is refused, and commits nothing.
	if _, err := r.Fork(ForkOptions{From: "a", Name: "c", Point: point, After: func() []PathChange {
		return []PathChange{{Path: "agents/a/state/k", Action: Deleted}}
	}, Trailers: trailers, Author: opts("").Author, When: testTime}); !errors.Is(err, ErrBadName) {
		t.Fatal(err)
	}
	if h, _ := r.Head(); h != cm.Hash {
		t.Fatalf("a refused fork committed: HEAD %s", h)
	}
	fs := mustFiles(t, r, "HEAD", "agents/b/")
	if fs["agents/b/state/k"] != BlobHash([]byte("v\n")) || fs["agents/b/sys/budget.json"] != BlobHash([]byte(`{"used":{}}`)) {
		t.Fatal(fs)
	}
	if from, at, err := r.ForkPoint("b"); err != nil || from != "a" || at != point {
		t.Fatal(from, at, err)
	}
	if _, _, err := r.ForkPoint("a"); err == nil || err.(*proto.Error).Code != proto.ENOENT {
		t.Fatal(err)
	}
	vals, err := r.ReadFork(memStore{"agents/a/state/k": []byte("live")}, "a",
		[]ForkFile{{Space: "state", Key: "k", Blob: fs["agents/b/state/k"]}, {Space: "sys", Key: "budget.json", Blob: BlobHash([]byte("{}"))}}, true)
	if err != nil || string(vals[0]) != "live" || string(vals[1]) != "{}" {
		t.Fatal(vals, err)
	}

	// b against its fork point, then against a with a live change.
	change(t, r, map[string][]byte{"agents/b/state/k2": []byte("new\n")}, "two")
	bLive := memStore{"agents/b/state/k": []byte("v\n"), "agents/b/state/k2": []byte("new\n"), "agents/b/sys/budget.json": []byte(`{"used":{}}`)}
	recs, err := r.AgentDiff(bLive, func(string) ([]string, error) { return nil, nil }, "b", "", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Path != "state/k2" || recs[0].Action != Added || !strings.Contains(recs[0].Patch, "+new") || recs[1].Path != "sys/budget.json" || recs[1].Action != Modified {
		t.Fatalf("%+v", recs)
	}
	live := memStore{"agents/a/state/k": []byte("v\n"), "agents/b/state/k": []byte("v\n"), "agents/b/state/k2": []byte("new\n"), "agents/a/state/k2": []byte("new\n")}
	under := func(prefix string) ([]string, error) {
		if prefix == "agents/a/" {
			return []string{"agents/a/state/k2"}, nil
		}
		return nil, nil
	}
	recs, err = r.AgentDiff(live, under, "b", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Path != "sys/budget.json" {
		t.Fatalf("%+v", recs)
	}
}

// ReadFork reads many files on several goroutines, few on the caller's,
// each from the live store when it has the file and from git otherwise.
func TestReadForkManyAndFew(t *testing.T) {
	r := open(t)
	files := map[string][]byte{}
	for i := range 3 * forkReadInline {
		files[fmt.Sprintf("agents/a/state/k%02d", i)] = []byte(fmt.Sprint("git ", i))
	}
	change(t, r, files, "many")
	live := memStore{"agents/a/state/k07": []byte("live 7")}
	for _, n := range []int{1, forkReadInline, 3 * forkReadInline} {
		var ff []ForkFile
		for i := range n {
			k := fmt.Sprintf("k%02d", i)
			ff = append(ff, ForkFile{Space: "state", Key: k, Blob: BlobHash(files["agents/a/state/"+k])})
		}
		vals, err := r.ReadFork(live, "a", ff, true)
		if err != nil {
			t.Fatal(n, err)
		}
		for i, v := range vals {
			want := fmt.Sprint("git ", i)
			if i == 7 {
				want = "live 7"
			}
			if string(v) != want {
				t.Errorf("%d files: file %d = %q, want %q", n, i, v, want)
			}
		}
	}
	if _, err := r.ReadFork(memStore{}, "a", []ForkFile{{Space: "state", Key: "x", Blob: BlobHash([]byte("never stored"))}}, true); err == nil {
		t.Error("a blob git does not have was read")
	}
}

// The graft tells Staged whether it can be made before it commits: not
// over an agent HEAD has, nor of a folder the point lacks; neither
// refusal commits anything.
func TestForkStaged(t *testing.T) {
	r := open(t)
	point := change(t, r, map[string][]byte{"agents/a/state/k": []byte("v\n"), "agents/b/state/k": []byte("w\n")}, "one").Hash
	for _, c := range []struct {
		from, name string
		want       error
	}{{"a", "b", ErrExists}, {"none", "c", ErrUnknownRevision}, {"a", "c", nil}} {
		var heard []error
		_, err := r.Fork(ForkOptions{From: c.from, Name: c.name, Point: point, Staged: func(err error) { heard = append(heard, err) },
			Trailers: []Trailer{{Key: TrailerForkOf, Value: c.from}, {Key: TrailerForkPoint, Value: point}}, Author: opts("").Author, When: testTime})
		if len(heard) != 1 || !errors.Is(heard[0], c.want) || !errors.Is(err, c.want) {
			t.Errorf("fork %s as %s: Staged heard %v, Fork returned %v; want %v", c.from, c.name, heard, err, c.want)
		}
		head, _ := r.Head()
		if c.want != nil && head != point {
			t.Errorf("fork %s as %s was refused but HEAD moved to %s", c.from, c.name, head)
		}
	}
	if fs := mustFiles(t, r, "HEAD", "agents/c/"); fs["agents/c/state/k"] != BlobHash([]byte("v\n")) {
		t.Errorf("the fork made: %v", fs)
	}
}
