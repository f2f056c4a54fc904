package version

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestOpenCreates(t *testing.T) {
	needGit(t)
	r := open(t)
	if h, err := r.Head(); err != nil || h != "" {
		t.Fatalf("Head of a new repository: %q, %v", h, err)
	}
	if got := strings.TrimSpace(git(t, r.Dir(), "symbolic-ref", "HEAD")); got != "refs/heads/main" {
		t.Fatalf("HEAD -> %s", got)
	}
	if got := strings.TrimSpace(git(t, r.Dir(), "rev-parse", "--is-bare-repository")); got != "false" {
		t.Fatalf("bare: %s", got)
	}
	if _, err := r.Resolve("HEAD"); !errors.Is(err, ErrUnknownRevision) {
		t.Fatalf("Resolve(HEAD) with no commit: %v", err)
	}
	fsck(t, r.Dir())
}

func TestRoundTrip(t *testing.T) {
	needGit(t)
	r := open(t)
	want := map[string]string{}
	step := func(files map[string][]byte, msg string) Commit {
		t.Helper()
		c := change(t, r, files, msg)
		model(want, files)
		if got := mustFiles(t, r, "HEAD", ""); !maps.Equal(got, want) {
			t.Fatalf("%s: Files = %v, want %v", msg, got, want)
		}
		if got := lsTree(t, r.Dir(), "HEAD"); !maps.Equal(got, want) {
			t.Fatalf("%s: git ls-tree = %v, want %v", msg, got, want)
		}
		return c
	}
	c1 := step(map[string][]byte{
		"agents/ops/state/a.md":         []byte("alpha\n"),
		"agents/ops/state/notes/b.md":   []byte("beta\n"),
		"agents/ops/state/notes/x/c.md": []byte("gamma\n"),
		"agents/ops/policy.toml":        []byte("allow = []\n"),
		"agents/web/state/a.md":         []byte("alpha\n"), // same blob, other path
	}, "first")
	if c1.Parent != "" || len(c1.Changed) != 5 || c1.Changed[0].Action != Added {
		t.Fatalf("first commit: %+v", c1)
	}
	c2 := step(map[string][]byte{
		"agents/ops/state/a.md":         []byte("alpha 2\n"),
		"agents/ops/state/notes/x/c.md": nil, // x/ becomes empty and vanishes
		"agents/ops/state/a":            []byte("a file beside a.md and a/\n"),
	}, "second")
	if c2.Parent != c1.Hash {
		t.Fatalf("parent %s, want %s", c2.Parent, c1.Hash)
	}
	wantCh := []PathChange{
		{Path: "agents/ops/state/a", Action: Added, To: BlobHash([]byte("a file beside a.md and a/\n"))},
		{Path: "agents/ops/state/a.md", Action: Modified, From: BlobHash([]byte("alpha\n")), To: BlobHash([]byte("alpha 2\n"))},
		{Path: "agents/ops/state/notes/x/c.md", Action: Deleted, From: BlobHash([]byte("gamma\n"))},
	}
	if !reflect.DeepEqual(c2.Changed, wantCh) {
		t.Fatalf("Changed = %+v\nwant %+v", c2.Changed, wantCh)
	}
	if out := git(t, r.Dir(), "ls-tree", "-d", "HEAD", "agents/ops/state/notes/"); strings.Contains(out, "notes/x") {
		t.Fatalf("empty folder kept: %s", out)
	}
	// Git's order: "a" < "a.md" < "a/" ... and "a/" must sort after "a.md".
	step(map[string][]byte{"agents/ops/state/a/b": []byte("under a/\n"), "agents/ops/state/a": nil}, "dir where a file was")
	step(map[string][]byte{"agents/ops/state/a.b/c": []byte("1"), "agents/ops/state/a-b": []byte("2"), "agents/ops/state/a0": []byte("3")}, "order")

	// A put of what HEAD holds, a put then delete of a new path, and a
	// delete of a missing path change nothing.
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	tx.Put("agents/ops/state/a.md", []byte("alpha 2\n"))
	tx.Put("agents/ops/state/new.md", []byte("new\n"))
	tx.Delete("agents/ops/state/new.md")
	tx.Delete("agents/ops/state/missing.md")
	tx.Delete("agents/ops/state/notes") // a folder, not a file
	if ch := tx.Changed(); len(ch) != 0 {
		t.Fatalf("Changed = %+v, want none", ch)
	}
	if _, err := tx.Commit(opts("nothing")); !errors.Is(err, ErrNothingToCommit) {
		t.Fatalf("Commit of no change: %v", err)
	}
	if err := tx.Put("x", nil); !errors.Is(err, ErrTxDone) {
		t.Fatalf("Put after Commit: %v", err)
	}
	// AllowEmpty commits anyway.
	tx, _ = r.Begin()
	ce, err := tx.Commit(CommitOptions{Message: "empty", AllowEmpty: true})
	if err != nil || len(ce.Changed) != 0 {
		t.Fatalf("AllowEmpty: %+v %v", ce, err)
	}
	if ce.Author.Name != defaultName || ce.Author.Email != defaultEmail {
		t.Fatalf("default author: %+v", ce.Author)
	}
	// Every file deleted: the root is the empty tree.
	all := map[string][]byte{}
	for p := range want {
		all[p] = nil
	}
	c := step(all, "delete everything")
	if c.Tree != emptyTree.String() {
		t.Fatalf("tree %s, want the empty tree", c.Tree)
	}
	step(map[string][]byte{"agents/ops/state/a.md": []byte("back\n")}, "again")

	for _, p := range []string{"agents/ops/state/a.md", "agents/ops/state/a/b"} {
		h := BlobHash([]byte("back\n"))
		if p == "agents/ops/state/a/b" {
			h = BlobHash([]byte("under a/\n"))
		}
		b, err := r.ReadBlob(h)
		if err != nil {
			t.Fatal(err)
		}
		if cat := git(t, r.Dir(), "cat-file", "blob", h); cat != string(b) {
			t.Fatalf("cat-file %s = %q, ReadBlob = %q", h, cat, b)
		}
	}
	if n := strings.Count(git(t, r.Dir(), "log", "--format=%H"), "\n"); n != 7 {
		t.Fatalf("git log: %d commits, want 7", n)
	}
	fsck(t, r.Dir())
}

func TestBlobHashMatchesGit(t *testing.T) {
	needGit(t)
	dir := t.TempDir()
	for _, s := range []string{"", "x", "hello\n", strings.Repeat("z", 10000)} {
		out, err := gitErr(dir, s, "hash-object", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		if got := BlobHash([]byte(s)); got != strings.TrimSpace(out) {
			t.Fatalf("BlobHash(%d bytes) = %s, git says %s", len(s), got, out)
		}
	}
}

func TestConflicts(t *testing.T) {
	needGit(t)
	r := open(t)
	change(t, r, map[string][]byte{"s/dir/f": []byte("1"), "s/file": []byte("2")}, "init")
	for _, tc := range []struct {
		files map[string][]byte
		what  string
	}{
		{map[string][]byte{"s/dir": []byte("x")}, "s/dir is a folder"},
		{map[string][]byte{"s/file/under": []byte("x")}, "s/file is a file"},
	} {
		tx, _ := r.Begin()
		for p, v := range tc.files {
			tx.Put(p, v)
		}
		if _, err := tx.Commit(opts("conflict")); err == nil || !strings.Contains(err.Error(), tc.what) {
			t.Fatalf("want an error naming %q, got %v", tc.what, err)
		}
	}
	// The same, with the obstacle deleted in the same commit: fine.
	c := change(t, r, map[string][]byte{"s/dir/f": nil, "s/dir": []byte("x"), "s/file": nil, "s/file/under": []byte("y")}, "swap")
	if len(c.Changed) != 4 {
		t.Fatalf("Changed: %+v", c.Changed)
	}
	want := map[string]string{"s/dir": BlobHash([]byte("x")), "s/file/under": BlobHash([]byte("y"))}
	if got := lsTree(t, r.Dir(), "HEAD"); !maps.Equal(got, want) {
		t.Fatalf("ls-tree %v", got)
	}
	fsck(t, r.Dir())
}

func TestCheckPath(t *testing.T) {
	for _, p := range []string{"", "/a", "a/", "a//b", "a/./b", "a/../b", "a\x00b", ".git/x", "a/.GIT/b", "a/.git./b",
		"a/.git /b", "a/git~1", "a/.gitmodules", "a/.GitModules", "a/.git\u200c/b", "a/.git::$INDEX_ALLOCATION/b", "gitmod~1"} {
		if err := CheckPath(p); !errors.Is(err, ErrBadName) {
			t.Errorf("CheckPath(%q) = %v, want ErrBadName", p, err)
		}
	}
	for _, p := range []string{"a", "a/b.md", ".gitignore", "a/.github/x", "git~2", "a/..b", "notes/…/x", "ünï/cödé"} {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v", p, err)
		}
	}
	r := open(t)
	tx, _ := r.Begin()
	defer tx.Abort()
	if err := tx.Put("agents/a/state/.git/config", []byte("x")); !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), ".git/config") {
		t.Fatalf("Put of a .git path: %v", err)
	}
}

func TestTrailers(t *testing.T) {
	needGit(t)
	r := open(t)
	tx, _ := r.Begin()
	tx.Put("agents/ops/state/k", []byte("v"))
	hash := strings.Repeat("ab", 32)
	o := opts("state: 1 change\n\nSaved by ops.\n")
	o.Trailers = []Trailer{{"Oxios-Audit-Seq", "42"}, {"Oxios-Audit-Hash", hash}}
	o.Committer = Signature{Name: "oxiosd", Email: "daemon@oxios", When: testTime.Add(3600e9)}
	c, err := tx.Commit(o)
	if err != nil {
		t.Fatal(err)
	}
	got := git(t, r.Dir(), "log", "-1", "--format=%(trailers:key=Oxios-Audit-Seq,valueonly)%(trailers:key=Oxios-Audit-Hash,valueonly)")
	if got != "42\n"+hash+"\n\n" {
		t.Fatalf("git log trailers: %q", got)
	}
	body := git(t, r.Dir(), "log", "-1", "--format=%B")
	parsed, err := gitErr(r.Dir(), body, "interpret-trailers", "--parse")
	if err != nil || parsed != "Oxios-Audit-Seq: 42\nOxios-Audit-Hash: "+hash+"\n" {
		t.Fatalf("interpret-trailers --parse: %q %v", parsed, err)
	}
	if got := git(t, r.Dir(), "log", "-1", "--format=%an <%ae> %at|%cn <%ce> %ct|%s"); got != fmt.Sprintf("Ops Agent <ops@oxios> %d|oxiosd <daemon@oxios> %d|state: 1 change\n", testTime.Unix(), testTime.Unix()+3600) {
		t.Fatalf("git log: %q", got)
	}
	s, err := r.Show("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if s.Message != "state: 1 change\n\nSaved by ops." || !reflect.DeepEqual(s.Trailers, o.Trailers) || s.Hash != c.Hash ||
		!s.Time.Equal(o.Committer.When) || s.Author.Name != "Ops Agent" || s.Committer.Email != "daemon@oxios" {
		t.Fatalf("Show = %+v", s)
	}
	if c.Message != s.Message || !reflect.DeepEqual(c.Trailers, s.Trailers) || !c.Time.Equal(s.Time) || c.Tree != s.Tree {
		t.Fatalf("Commit = %+v\nShow = %+v", c, s)
	}
	// A trailer git would not read back is refused before committing.
	for _, bad := range []Trailer{{"Bad Key", "v"}, {"K", "two\nlines"}, {"K", " "}, {"", "v"}} {
		tx, _ := r.Begin()
		tx.Put("agents/ops/state/k", []byte("w"))
		o := opts("m")
		o.Trailers = []Trailer{bad}
		if _, err := tx.Commit(o); !errors.Is(err, ErrBadName) {
			t.Fatalf("trailer %+v: %v", bad, err)
		}
	}
	tx, _ = r.Begin()
	tx.Put("agents/ops/state/k", []byte("w"))
	if _, err := tx.Commit(CommitOptions{Message: " \n"}); !errors.Is(err, ErrBadName) {
		t.Fatalf("empty message: %v", err)
	}
	fsck(t, r.Dir())
}

func TestResolve(t *testing.T) {
	needGit(t)
	r := open(t)
	var cs []Commit
	for i := range 5 {
		cs = append(cs, change(t, r, map[string][]byte{fmt.Sprintf("f%d", i): []byte{byte(i)}}, fmt.Sprint("c", i)))
	}
	if _, err := r.Tag("v1", "HEAD~3"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Tag("rel/2", cs[2].Hash[:7]); err != nil {
		t.Fatal(err)
	}
	// An annotated tag made by git is peeled.
	git(t, r.Dir(), "tag", "-a", "-m", "annotated", "ann", cs[0].Hash)
	head := cs[4].Hash
	for rev, want := range map[string]string{
		"HEAD": head, "@": head, "main": head, "refs/heads/main": head, head: head, strings.ToUpper(head[:8]): head,
		head[:4]: head, "HEAD~": cs[3].Hash, "HEAD~1": cs[3].Hash, "HEAD^": cs[3].Hash, "HEAD^1": cs[3].Hash,
		"HEAD^^": cs[2].Hash, "HEAD~2^": cs[1].Hash, "HEAD~4": cs[0].Hash, "HEAD^0": head, "main~2": cs[2].Hash,
		"v1": cs[1].Hash, "v1~1": cs[0].Hash, "refs/tags/v1": cs[1].Hash, "rel/2": cs[2].Hash, "ann": cs[0].Hash,
		cs[1].Hash[:10] + "~1": cs[0].Hash,
	} {
		got, err := r.Resolve(rev)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %s, %v; want %s", rev, got, err, want)
		}
		if g := strings.TrimSpace(git(t, r.Dir(), "rev-parse", rev+"^{commit}")); g != want && rev != "@" {
			t.Errorf("git rev-parse %q = %s, want %s", rev, g, want)
		}
	}
	for rev, wantErr := range map[string]error{
		"nope": ErrUnknownRevision, "HEAD~5": ErrUnknownRevision, "HEAD^2": ErrUnknownRevision,
		"~1": ErrUnknownRevision, "abc": ErrUnknownRevision, "0000000000": ErrUnknownRevision,
		strings.Repeat("0", 40): ErrUnknownRevision, "HEAD~x": ErrUnknownRevision,
	} {
		_, err := r.Resolve(rev)
		if !errors.Is(err, wantErr) || !strings.Contains(err.Error(), strconv.Quote(rev)) {
			t.Errorf("Resolve(%q) = %v, want %v naming the revision", rev, err, wantErr)
		}
	}
	// A prefix of a blob only: unknown, and the error says why.
	blob := BlobHash([]byte{0})
	if _, err := r.Resolve(blob[:8]); !errors.Is(err, ErrUnknownRevision) || !strings.Contains(err.Error(), "blob") {
		t.Errorf("Resolve(blob prefix) = %v", err)
	}
	if _, err := r.Resolve(blob); !errors.Is(err, ErrUnknownRevision) || !strings.Contains(err.Error(), "not a commit") {
		t.Errorf("Resolve(blob) = %v", err)
	}

	// Make two commits share their first 4 hex digits: choose the message
	// of an empty commit on HEAD so that its hash starts like cs[0]'s.
	c, _ := r.readCommit(mustID(t, head))
	var msg string
	for i := 0; ; i++ {
		msg = fmt.Sprintf("collide %d", i)
		m, _ := buildMessage(msg, nil)
		a, _ := opts(msg).Author.normalize("author")
		if hashObject(objCommit, encodeCommit(c.tree, mustID(t, head), a, a, m)).String()[:4] == cs[0].Hash[:4] {
			break
		}
	}
	tx, _ := r.Begin()
	o := opts(msg)
	o.AllowEmpty = true
	twin, err := tx.Commit(o)
	if err != nil {
		t.Fatal(err)
	}
	if twin.Hash[:4] != cs[0].Hash[:4] {
		t.Fatalf("twin %s does not share the prefix of %s", twin.Hash, cs[0].Hash)
	}
	_, err = r.Resolve(twin.Hash[:4])
	if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), cs[0].Hash) || !strings.Contains(err.Error(), twin.Hash) {
		t.Fatalf("Resolve(ambiguous) = %v", err)
	}
	if got, err := r.Resolve(twin.Hash[:12]); err != nil || got != twin.Hash {
		t.Fatalf("Resolve(longer prefix) = %s %v", got, err)
	}
}

func mustID(t testing.TB, s string) oid {
	id, ok := parseID(s)
	if !ok {
		t.Fatalf("bad id %q", s)
	}
	return id
}

func TestTag(t *testing.T) {
	needGit(t)
	r := open(t)
	c1 := change(t, r, map[string][]byte{"a": []byte("1")}, "one")
	if _, err := r.Tag("v1", "HEAD"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"v1", "v1/sub"} {
		if _, err := r.Tag(name, "HEAD"); !errors.Is(err, ErrExists) {
			t.Errorf("Tag(%q) over v1: %v", name, err)
		}
	}
	if _, err := r.Tag("grp/x", "HEAD"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Tag("grp", "HEAD"); !errors.Is(err, ErrExists) {
		t.Errorf("Tag(grp) over grp/x: %v", err)
	}
	for _, name := range []string{"", "a..b", "-x", "a b", "x.lock", "a/", "/a", "@", "a@{1}", "a~1", "a^", "a:b", "a?", "a*", "a[", `a\b`, ".x", "a/.b", "x.", "tab\there", "del\x7f"} {
		if _, err := r.Tag(name, "HEAD"); !errors.Is(err, ErrBadName) {
			t.Errorf("Tag(%q) = %v, want ErrBadName", name, err)
		}
		// Stricter than git for "-x" (git tag refuses it) and "@".
		if _, err := gitErr(r.Dir(), "", "check-ref-format", "refs/tags/"+name); err == nil && name != "-x" && name != "@" {
			t.Errorf("git check-ref-format accepts %q, Tag refuses it", name)
		}
	}
	if _, err := r.Tag("v2", "nope"); !errors.Is(err, ErrUnknownRevision) {
		t.Errorf("Tag of an unknown revision: %v", err)
	}
	// Commit with a taken tag fails before committing.
	tx, _ := r.Begin()
	tx.Put("a", []byte("2"))
	o := opts("two")
	o.Tag = "v1"
	if _, err := tx.Commit(o); !errors.Is(err, ErrExists) {
		t.Fatalf("Commit with a taken tag: %v", err)
	}
	if h, _ := r.Head(); h != c1.Hash {
		t.Fatalf("HEAD moved to %s", h)
	}
	tx, _ = r.Begin()
	tx.Put("a", []byte("2"))
	o.Tag = "bad..name"
	if _, err := tx.Commit(o); !errors.Is(err, ErrBadName) {
		t.Fatalf("Commit with a bad tag: %v", err)
	}
	tx, _ = r.Begin()
	tx.Put("a", []byte("2"))
	o.Tag = "v2"
	c2, err := tx.Commit(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(git(t, r.Dir(), "tag", "-l")); !slices.Equal(got, []string{"grp/x", "v1", "v2"}) {
		t.Fatalf("git tag -l: %v", got)
	}
	if got := strings.TrimSpace(git(t, r.Dir(), "rev-parse", "v2")); got != c2.Hash {
		t.Fatalf("v2 -> %s, want %s", got, c2.Hash)
	}
	tags, err := r.Tags()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{c1.Hash: {"grp/x", "v1"}, c2.Hash: {"v2"}}
	if !reflect.DeepEqual(tags, want) {
		t.Fatalf("Tags = %v", tags)
	}
	if got := r.TagsAt(c1.Hash); !slices.Equal(got, []string{"grp/x", "v1"}) {
		t.Fatalf("TagsAt = %v", got)
	}
	if got := r.TagsAt(strings.Repeat("0", 40)); got != nil {
		t.Fatalf("TagsAt(none) = %v", got)
	}
	fsck(t, r.Dir())
}

func TestLogPrefix(t *testing.T) {
	needGit(t)
	r := open(t)
	var hashes []string
	add := func(files map[string][]byte) {
		hashes = append(hashes, change(t, r, files, fmt.Sprint("c", len(hashes))).Hash)
	}
	add(map[string][]byte{"agents/a/state/x": []byte("1"), "agents/b/state/x": []byte("1")}) // 0: a, b
	add(map[string][]byte{"agents/b/state/x": []byte("2")})                                  // 1: b
	add(map[string][]byte{"agents/a/state/y": []byte("1")})                                  // 2: a
	add(map[string][]byte{"agents/ab/state/x": []byte("1")})                                 // 3: ab (not a)
	add(map[string][]byte{"agents/a/state/x": nil, "agents/b/policy.toml": []byte("p")})     // 4: a, b
	tx, _ := r.Begin()
	tx.Commit(CommitOptions{Message: "empty", AllowEmpty: true}) // 5: nothing

	logOf := func(rev, prefix string, n int) ([]string, []Commit) {
		t.Helper()
		var idx []string
		var cs []Commit
		err := r.Log(rev, prefix, n, func(c Commit) error {
			idx = append(idx, strconv.Itoa(slices.Index(hashes, c.Hash)))
			cs = append(cs, c)
			return nil
		})
		if err != nil {
			t.Fatalf("Log(%s, %q): %v", rev, prefix, err)
		}
		return idx, cs
	}
	for _, tc := range []struct {
		rev, prefix string
		n           int
		want        string
	}{
		{"HEAD", "agents/a", 0, "4 2 0"},
		{"HEAD", "agents/a/", 0, "4 2 0"},
		{"HEAD", "agents/b", 0, "4 1 0"},
		{"HEAD", "agents/b/state/x", 0, "1 0"},
		{"HEAD", "agents/ab", 0, "3"},
		{"HEAD", "agents/none", 0, ""},
		{"HEAD", "", 0, "-1 4 3 2 1 0"},
		{"HEAD", "", 2, "-1 4"},
		{"HEAD", "agents/a", 1, "4"},
		{"HEAD~3", "agents/a", 0, "2 0"},
	} {
		got, _ := logOf(tc.rev, tc.prefix, tc.n)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Log(%s, %q, %d) = %v, want %s", tc.rev, tc.prefix, tc.n, got, tc.want)
		}
		if tc.prefix != "" && tc.n == 0 {
			// git log's own path filter agrees.
			var gitIdx []string
			for h := range strings.FieldsSeq(git(t, r.Dir(), "log", "--first-parent", "--format=%H", tc.rev, "--", tc.prefix)) {
				gitIdx = append(gitIdx, strconv.Itoa(slices.Index(hashes, h)))
			}
			if !slices.Equal(got, gitIdx) {
				t.Errorf("Log(%s, %q) = %v, git log says %v", tc.rev, tc.prefix, got, gitIdx)
			}
		}
	}
	_, cs := logOf("HEAD", "agents/a", 0)
	want := []PathChange{{Path: "agents/a/state/x", Action: Deleted, From: BlobHash([]byte("1"))}}
	if !reflect.DeepEqual(cs[0].Changed, want) {
		t.Fatalf("Changed under agents/a: %+v", cs[0].Changed)
	}
	_, cs = logOf("HEAD", "", 0)
	if len(cs[1].Changed) != 2 || len(cs[0].Changed) != 0 {
		t.Fatalf("Changed of all: %+v / %+v", cs[1].Changed, cs[0].Changed)
	}
	stop := errors.New("stop")
	n := 0
	if err := r.Log("HEAD", "", 0, func(Commit) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Log stops on fn's error: %v after %d", err, n)
	}
	if err := r.Log("nope", "", 0, func(Commit) error { return nil }); !errors.Is(err, ErrUnknownRevision) {
		t.Fatalf("Log(nope): %v", err)
	}
}

func TestShowMatchesGit(t *testing.T) {
	needGit(t)
	r := open(t)
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[string]bool{}
	for i := range 30 {
		files := map[string][]byte{}
		for range 1 + rng.IntN(6) {
			p := fmt.Sprintf("agents/a%d/state/d%d/k%d", rng.IntN(3), rng.IntN(3), rng.IntN(8))
			if live[p] && rng.IntN(3) == 0 {
				files[p] = nil
				delete(live, p)
			} else if _, taken := files[p]; !taken {
				files[p] = fmt.Appendf(nil, "v%d\n", rng.IntN(1000))
				live[p] = true
			}
		}
		tx, _ := r.Begin()
		for p, v := range files {
			if v == nil {
				tx.Delete(p)
			} else {
				tx.Put(p, v)
			}
		}
		if _, err := tx.Commit(opts(fmt.Sprint("c", i))); err != nil && !errors.Is(err, ErrNothingToCommit) {
			t.Fatal(err)
		}
	}
	for i := range 25 {
		rev := fmt.Sprintf("HEAD~%d", i)
		s, err := r.Show(rev)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range s.Changed {
			got = append(got, map[string]string{Added: "A", Modified: "M", Deleted: "D"}[c.Action]+" "+c.Path)
		}
		var want []string
		for line := range strings.Lines(git(t, r.Dir(), "diff-tree", "--no-commit-id", "-r", "--name-status", "--root", rev)) {
			st, p, _ := strings.Cut(strings.TrimSpace(line), "\t")
			want = append(want, st+" "+p)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Show(%s).Changed = %v, git diff-tree says %v", rev, got, want)
		}
		stat := git(t, r.Dir(), "show", "--stat", "--format=%H %T %P", rev)
		if !strings.HasPrefix(stat, s.Hash+" "+s.Tree+" "+s.Parent) {
			t.Fatalf("git show: %q vs %+v", stat, s)
		}
		if !maps.Equal(mustFiles(t, r, rev, ""), lsTree(t, r.Dir(), rev)) {
			t.Fatalf("Files(%s) differs from git ls-tree", rev)
		}
	}
}

func TestFilesAndDiff(t *testing.T) {
	r := open(t)
	c1 := change(t, r, map[string][]byte{"agents/a/state/x": []byte("1"), "agents/a/state/s/y": []byte("2"), "agents/b/state/z": []byte("3")}, "one")
	c2 := change(t, r, map[string][]byte{"agents/a/state/x": []byte("1b"), "agents/a/state/s/y": nil, "agents/a/state/n": []byte("4")}, "two")
	f1 := mustFiles(t, r, c1.Hash, "agents/a")
	f2 := mustFiles(t, r, c2.Hash, "agents/a/")
	if len(f1) != 2 || f1["agents/a/state/s/y"] != BlobHash([]byte("2")) {
		t.Fatalf("Files one: %v", f1)
	}
	if got := mustFiles(t, r, "HEAD", "agents/a/state/x"); !maps.Equal(got, map[string]string{"agents/a/state/x": BlobHash([]byte("1b"))}) {
		t.Fatalf("Files of a file: %v", got)
	}
	if got := mustFiles(t, r, "HEAD", "agents/nobody"); len(got) != 0 {
		t.Fatalf("Files of nothing: %v", got)
	}
	d := DiffFiles(f1, f2)
	want := []PathChange{
		{Path: "agents/a/state/n", Action: Added, To: BlobHash([]byte("4"))},
		{Path: "agents/a/state/s/y", Action: Deleted, From: BlobHash([]byte("2"))},
		{Path: "agents/a/state/x", Action: Modified, From: BlobHash([]byte("1")), To: BlobHash([]byte("1b"))},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("DiffFiles = %+v", d)
	}
	if !reflect.DeepEqual(c2.Changed, want) {
		t.Fatalf("Commit.Changed = %+v", c2.Changed)
	}
	if _, err := r.ReadBlob(strings.Repeat("1", 40)); err == nil || !strings.Contains(err.Error(), strings.Repeat("1", 40)) {
		t.Fatalf("ReadBlob(missing) = %v", err)
	}
	if _, err := r.ReadBlob(c1.Tree); err == nil || !strings.Contains(err.Error(), "tree") {
		t.Fatalf("ReadBlob(tree) = %v", err)
	}
	if _, err := r.ReadBlob("abc"); !errors.Is(err, ErrBadName) {
		t.Fatalf("ReadBlob(abc) = %v", err)
	}
}

func TestAbortAndBusy(t *testing.T) {
	needGit(t)
	r := open(t)
	c1 := change(t, r, map[string][]byte{"d/a": []byte("1")}, "one")
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Begin(); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Begin: %v", err)
	}
	tx.Put("d/b", []byte("2"))
	tx.Delete("d/a")
	tx.Abort()
	tx.Abort()
	if h, _ := r.Head(); h != c1.Hash {
		t.Fatalf("HEAD after Abort: %s", h)
	}
	c2 := change(t, r, map[string][]byte{"d/c": []byte("3")}, "two")
	want := map[string]string{"d/a": BlobHash([]byte("1")), "d/c": BlobHash([]byte("3"))}
	if got := lsTree(t, r.Dir(), c2.Hash); !maps.Equal(got, want) {
		t.Fatalf("after an aborted Tx: %v", got)
	}
	// A failed Commit ends the Tx and leaves the cache as it was.
	tx, _ = r.Begin()
	tx.Put("d/c/x", []byte("conflict"))
	if _, err := tx.Commit(opts("fails")); err == nil {
		t.Fatal("conflicting commit succeeded")
	}
	c3 := change(t, r, map[string][]byte{"d/e": []byte("5")}, "three")
	want["d/e"] = BlobHash([]byte("5"))
	if got := lsTree(t, r.Dir(), c3.Hash); !maps.Equal(got, want) {
		t.Fatalf("after a failed Commit: %v", got)
	}
	fsck(t, r.Dir())
}

func TestReopen(t *testing.T) {
	needGit(t)
	dir := filepath.Join(t.TempDir(), "repo")
	want := map[string]string{}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 4 {
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if round > 0 {
			if got := mustFiles(t, r, "HEAD", ""); !maps.Equal(got, want) {
				t.Fatalf("round %d: Files after reopen differ", round)
			}
		}
		for i := range 10 {
			files := map[string][]byte{}
			for range 5 {
				p := fmt.Sprintf("agents/a%d/state/k%d", rng.IntN(4), rng.IntN(20))
				if _, ok := want[p]; ok && rng.IntN(4) == 0 {
					files[p] = nil
				} else {
					files[p] = fmt.Appendf(nil, "%d/%d/%d", round, i, rng.IntN(100))
				}
			}
			change(t, r, files, fmt.Sprintf("r%d c%d", round, i))
			model(want, files)
		}
		if got := lsTree(t, dir, "HEAD"); !maps.Equal(got, want) {
			t.Fatalf("round %d: git ls-tree differs from the model", round)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Head(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Head after Close: %v", err)
		}
	}
	fsck(t, dir)

	// Another writer moves the branch (here: back one commit); the next
	// transaction starts from there, not from the cached tree.
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	change(t, r, map[string][]byte{"warm/cache": []byte("1")}, "warm")
	git(t, dir, "update-ref", "refs/heads/main", "HEAD~1")
	prev := lsTree(t, dir, "HEAD")
	c := change(t, r, map[string][]byte{"after/reset": []byte("2")}, "after reset")
	prev["after/reset"] = BlobHash([]byte("2"))
	if got := lsTree(t, dir, c.Hash); !maps.Equal(got, prev) {
		t.Fatalf("commit after an outside ref update has the wrong tree")
	}
	fsck(t, dir)
}

// TestManyCommitsAndPacks makes many commits with a low pack limit, so
// packs are merged often, and checks the result with git.
func TestManyCommitsAndPacks(t *testing.T) {
	needGit(t)
	r := open(t)
	r.maxPacks = 6
	want := map[string]string{}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 150 {
		files := map[string][]byte{}
		for range 1 + rng.IntN(4) {
			p := fmt.Sprintf("agents/a%d/state/d%d/k%d.md", rng.IntN(5), rng.IntN(5), rng.IntN(10))
			if _, ok := want[p]; ok && rng.IntN(3) == 0 {
				files[p] = nil
			} else {
				files[p] = fmt.Appendf(nil, "value %d of %s\n", rng.IntN(50), p)
			}
		}
		tx, _ := r.Begin()
		for p, v := range files {
			if v == nil {
				tx.Delete(p)
			} else {
				tx.Put(p, v)
			}
		}
		if _, err := tx.Commit(opts(fmt.Sprint("commit ", i))); err != nil && !errors.Is(err, ErrNothingToCommit) {
			t.Fatal(err)
		}
		model(want, files)
	}
	packs, _ := filepath.Glob(filepath.Join(r.Dir(), ".git/objects/pack/*.pack"))
	if len(packs) > 6 {
		t.Fatalf("%d packs, limit 6", len(packs))
	}
	tmp, _ := filepath.Glob(filepath.Join(r.Dir(), ".git/objects/pack/tmp_*"))
	if len(tmp) > 0 {
		t.Fatalf("temp files left: %v", tmp)
	}
	if got := lsTree(t, r.Dir(), "HEAD"); !maps.Equal(got, want) {
		t.Fatal("git ls-tree differs from the model")
	}
	fsck(t, r.Dir())
	// git verify-pack checks each pack's index and checksums.
	for _, p := range packs {
		git(t, r.Dir(), "verify-pack", strings.TrimSuffix(p, ".pack")+".idx")
	}
	// Reopened, everything is still found (packs listed from disk).
	r.Close()
	r2, err := Open(r.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	n := 0
	if err := r2.Log("HEAD", "", 0, func(Commit) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if gitN := strings.Count(git(t, r.Dir(), "log", "--format=%H"), "\n"); n != gitN {
		t.Fatalf("Log: %d commits, git log: %d", n, gitN)
	}
}

func TestLargeCommit(t *testing.T) {
	needGit(t)
	r := open(t)
	files := map[string][]byte{}
	for i := range 2000 {
		files[fmt.Sprintf("agents/a%d/state/d%d/k%d.md", i%7, i%40, i)] = fmt.Appendf(nil, "value %d %s\n", i, strings.Repeat("x", i%300))
	}
	c := change(t, r, files, "large")
	if len(c.Changed) != 2000 {
		t.Fatalf("Changed: %d", len(c.Changed))
	}
	want := map[string]string{}
	model(want, files)
	if got := lsTree(t, r.Dir(), "HEAD"); !maps.Equal(got, want) {
		t.Fatal("git ls-tree differs")
	}
	fsck(t, r.Dir())
	stat := git(t, r.Dir(), "show", "--stat=200", "--format=", "HEAD")
	if !strings.Contains(stat, "2000 files changed") {
		t.Fatalf("git show --stat: ...%s", stat[max(0, len(stat)-200):])
	}
	// The same files again with 10 changed: one small pack more.
	for i := range 10 {
		files[fmt.Sprintf("agents/a%d/state/d%d/k%d.md", i%7, i%40, i)] = []byte("changed\n")
	}
	c2 := change(t, r, files, "ten")
	if len(c2.Changed) != 10 {
		t.Fatalf("Changed: %d", len(c2.Changed))
	}
	fsck(t, r.Dir())
}

// TestGitGC lets git repack everything (deltas, packed refs, loose
// objects from git's own commit) and checks the package still reads it
// all and goes on committing.
func TestGitGC(t *testing.T) {
	needGit(t)
	dir := filepath.Join(t.TempDir(), "repo")
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("line of a long file that git will store as a delta\n"), 200)
	for i := range 20 {
		v := append(bytes.Clone(big), fmt.Sprintf("version %d\n", i)...)
		change(t, r, map[string][]byte{"agents/a/state/big": v, fmt.Sprintf("agents/a/state/k%d", i): []byte("x")}, fmt.Sprint("c", i))
	}
	r.Tag("v1", "HEAD~3")
	r.Close()
	// A commit by git itself, then gc (deltas, packed-refs), then a commit
	// whose objects stay loose.
	git(t, dir, "read-tree", "HEAD")
	os.WriteFile(filepath.Join(dir, "by-git"), []byte("from git\n"), 0o644)
	git(t, dir, "add", "by-git")
	git(t, dir, "commit", "-q", "-m", "by git")
	git(t, dir, "gc", "-q", "--aggressive")
	os.WriteFile(filepath.Join(dir, "by-git-2"), []byte("loose\n"), 0o644)
	git(t, dir, "add", "by-git-2")
	git(t, dir, "commit", "-q", "-m", "by git, loose")

	r, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkAll := func(base string) {
		t.Helper()
		if got := mustFiles(t, r, base, ""); !maps.Equal(got, lsTree(t, dir, base)) {
			t.Fatalf("Files(%s) differs from git ls-tree", base)
		}
		for i := range 20 {
			rev := fmt.Sprintf("%s~%d", base, i+2)
			fs := mustFiles(t, r, rev, "agents/a/state/big")
			b, err := r.ReadBlob(fs["agents/a/state/big"])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasSuffix(b, fmt.Appendf(nil, "version %d\n", 19-i)) {
				t.Fatalf("%s: big ends %q", rev, b[len(b)-20:])
			}
		}
	}
	gitHead := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
	checkAll(gitHead)
	if got, err := r.Resolve("v1"); err != nil || got != strings.TrimSpace(git(t, dir, "rev-parse", "v1")) {
		t.Fatalf("Resolve(v1) after pack-refs: %s %v", got, err)
	}
	if _, err := r.Tag("v1", "HEAD"); !errors.Is(err, ErrExists) {
		t.Fatalf("Tag over a packed tag: %v", err)
	}
	c := change(t, r, map[string][]byte{"agents/a/state/k0": []byte("after gc")}, "after gc")
	want := lsTree(t, dir, "HEAD~1")
	want["agents/a/state/k0"] = BlobHash([]byte("after gc"))
	if got := lsTree(t, dir, c.Hash); !maps.Equal(got, want) {
		t.Fatal("commit after gc has the wrong tree")
	}
	// Packs from git (with deltas) merge like ours: deltas are resolved.
	if err := r.db.merge(slices.Clone(r.db.packs)); err != nil {
		t.Fatal(err)
	}
	if packs, _ := filepath.Glob(filepath.Join(dir, ".git/objects/pack/*.pack")); len(packs) != 1 {
		t.Fatalf("after merging: %d packs", len(packs))
	}
	checkAll(gitHead)
	fsck(t, dir)
}

func TestConcurrentReaders(t *testing.T) {
	r := open(t)
	r.maxPacks = 4 // merges happen while readers read
	change(t, r, map[string][]byte{"agents/a/state/k": []byte("0")}, "first")
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	errc := make(chan error, 8)
	for g := range 6 {
		wg.Go(func() {
			for !stop.Load() {
				err := func() error {
					head, err := r.Head()
					if err != nil {
						return err
					}
					switch g % 3 {
					case 0:
						return r.Log(head, "agents/a", 5, func(c Commit) error {
							_, err := r.Show(c.Hash)
							return err
						})
					case 1:
						fs, err := r.Files(head, "")
						if err != nil {
							return err
						}
						for p, h := range fs {
							b, err := r.ReadBlob(h)
							if err != nil {
								return fmt.Errorf("%s: %w", p, err)
							}
							if BlobHash(b) != h {
								return fmt.Errorf("%s: read %q, hash differs", p, b)
							}
						}
					case 2:
						if _, err := r.Resolve(head[:7] + "^0"); err != nil {
							return err
						}
						r.TagsAt(head)
					}
					return nil
				}()
				if err != nil {
					errc <- err
					return
				}
				reads.Add(1)
			}
		})
	}
	for i := range 80 {
		change(t, r, map[string][]byte{
			fmt.Sprintf("agents/a/state/k%d", i%9): fmt.Appendf(nil, "%d", i),
			fmt.Sprintf("agents/b/state/k%d", i%5): fmt.Appendf(nil, "%d", i),
		}, fmt.Sprint("c", i))
		if i%20 == 0 {
			r.Tag(fmt.Sprint("t", i), "HEAD")
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	t.Logf("%d reads during 80 commits", reads.Load())
}
