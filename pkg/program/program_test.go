package program

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/skill"
	"github.com/oxios/oxios/share"
)

const manifest = `name = "hello"
version = "1"
description = "Say hello"
command = ["hello.sh"]

[args.who]
description = "whom"
required = true

[args.how]
description = "the greeting"
default = "hello"

[policy.state]
write = ["hello/**"]
`

func TestParse(t *testing.T) {
	p, err := Parse([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "hello" || len(p.Args) != 2 || !p.Args["who"].Required || p.Policy.State.Write[0] != "hello/**" {
		t.Fatalf("parsed %+v", p)
	}
	for in, want := range map[string]string{
		strings.Replace(manifest, "[policy.state]", "[policy.stat]", 1):                             `unknown key "policy.stat`,
		strings.Replace(manifest, "write =", "wirte =", 1):                                          `unknown key "policy.state.wirte"`,
		strings.Replace(manifest, `name = "hello"`, `name = "Hello"`, 1):                            "program name",
		strings.Replace(manifest, `command = ["hello.sh"]`, ``, 1):                                  "no entry",
		strings.Replace(manifest, `command = ["hello.sh"]`, `task = "x"`+"\n"+`command = ["a"]`, 1): "not both",
		strings.Replace(manifest, `version = "1"`, ``, 1):                                           "no version",
		strings.Replace(manifest, `"hello/**"`, `"/abs/**"`, 1):                                     "state.write",
		manifest + "\n[policy.memory]\nkinds = [\"dreams\"]\n":                                      "not a kind",
		manifest + "\n[policy.work]\nallow = [\"src\"]\n":                                           "not an absolute path",
		strings.Replace(manifest, "[args.how]", "[args.How]", 1):                                    "argument",
		strings.Replace(manifest, `default = "hello"`, "required = true\ndefault = \"x\"", 1):       "required and has a default",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse: %v, want an error with %q\n%s", err, want, in)
		}
	}
}

// TestExceeds: what a fragment asks beyond a policy is named in the
// policy's terms, and a pattern is granted only when all it matches is.
func TestExceeds(t *testing.T) {
	pol := &policy.Policy{}
	pol.State.Read = []string{"**"}
	pol.State.Write = []string{"notes/**", "reviews/*", "x/*.md"}
	pol.Memory.Kinds = []string{"episodic"}
	pol.Exec.Allow = []string{"git", "grep"}
	pol.Net.Allow = []string{"*.example.org", "api.github.com"}
	pol.Msg.Send = []string{"ops-*"}
	pol.Work.Allow = []string{"/home/*/src/**"}
	pol.Sandbox.ReadWrite = []string{"/srv/mirror"}
	for _, c := range []struct {
		frag string
		want []string // substrings of the refusals, in order; none: granted
	}{
		{"[state]\nread = [\"a/b/**\"]\nwrite = [\"notes/**\", \"notes/a/*.txt\", \"reviews/r1\", \"x/a.md\"]\n", nil},
		{"[state]\nwrite = [\"reviews/**\"]\n", []string{`state.write "reviews/**"`}},
		{"[state]\nwrite = [\"**\"]\n", []string{`state.write "**"`}},
		{"[state]\nwrite = [\"x/*\"]\n", []string{`state.write "x/*"`}},
		{"[memory]\nkinds = [\"episodic\", \"semantic\"]\n", []string{`memory.kinds "semantic"`}},
		{"[exec]\nallow = [\"git\", \"sh\"]\nshell = true\n", []string{`exec.allow "sh"`, "exec.shell"}},
		{"[net]\nallow = [\"a.example.org\", \"*.b.example.org\", \"example.org\", \"github.com\"]\n", []string{`net.allow "example.org"`, `net.allow "github.com"`}},
		{"[msg]\nsend = [\"ops-1\", \"*\"]\n", []string{`msg.send "*"`}},
		{"[work]\nallow = [\"/home/ann/src/app\", \"/home/ann/**\"]\n", []string{`work.allow "/home/ann/**"`}},
		{"[sandbox]\nnetwork = true\nread_write = [\"/srv/mirror/ops.git\", \"/srv\"]\nread_only = [\"/srv/mirror\"]\n", []string{"sandbox.network", `sandbox.read_write "/srv"`}},
	} {
		p, err := Parse([]byte(strings.ReplaceAll("name = \"x\"\nversion = \"1\"\ndescription = \"d\"\ncommand = [\"x\"]\n"+c.frag, "\n[", "\n[policy.")))
		if err != nil {
			t.Fatalf("%s: %v", c.frag, err)
		}
		got := p.Policy.Exceeds(pol)
		if len(got) != len(c.want) {
			t.Errorf("%s: exceeds %q, want %d", c.frag, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: %q, want %q", c.frag, got[i], w)
			}
		}
	}
}

func TestBind(t *testing.T) {
	p, _ := Parse([]byte(manifest))
	vals, rest, err := p.Bind([]string{"who=ann", "x=y", "more"})
	if err != nil || vals["who"] != "ann" || vals["how"] != "hello" || !slices.Equal(rest, []string{"x=y", "more"}) {
		t.Fatalf("Bind: %v %v %v", vals, rest, err)
	}
	if _, _, err := p.Bind(nil); err == nil || !strings.Contains(err.Error(), "who=VALUE") {
		t.Fatalf("Bind without a required argument: %v", err)
	}
	if Env("dry-run") != "ARG_DRY_RUN" {
		t.Fatal(Env("dry-run"))
	}
	p.Task = "greet {{who}}"
	if got := p.TaskText(map[string]string{"who": "ann"}, []string{"now"}); got != "greet ann\n\nnow" {
		t.Fatalf("TaskText: %q", got)
	}
}

// TestShipped: every shipped program loads, its entry is one of its files,
// and it asks something of the default policy that the default grants.
func TestShipped(t *testing.T) {
	sub, _ := fs.Sub(share.Programs, "programs")
	ents, _ := fs.ReadDir(sub, ".")
	if len(ents) < 4 {
		t.Fatalf("%d shipped programs", len(ents))
	}
	for _, e := range ents {
		p, files, err := Load(sub, e.Name())
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if files[len(files)-1].Path != Manifest {
			t.Errorf("%s: %s is not written last", p.Name, Manifest)
		}
		if !slices.ContainsFunc(files, func(f skill.FileData) bool { return f.Path == p.Command[0] }) {
			t.Errorf("%s: its entry %s is not one of its files", p.Name, p.Command[0])
		}
		if over := p.Policy.Exceeds(policy.Default()); len(over) > 0 {
			t.Errorf("%s asks more than the default policy: %q", p.Name, over)
		}
	}
}

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"p/program.toml": {Data: []byte(manifest)},
		"p/SKILL.md":     {Data: []byte("---\nname: hello\ndescription: d\n---\nbody")},
		"p/hello.sh":     {Data: []byte("#!/bin/sh\necho hi\n")},
		"p/.git/HEAD":    {Data: []byte("x")},
	}
	p, files, err := Load(fsys, "p")
	if err != nil || p.Name != "hello" || len(files) != 3 || files[2].Path != Manifest {
		t.Fatalf("Load: %v %v", err, files)
	}
	fsys["p/hello.sh"] = &fstest.MapFile{Data: []byte("echo hi\n")}
	if _, _, err := Load(fsys, "p"); err == nil || !strings.Contains(err.Error(), "#!") {
		t.Fatalf("an entry without #!: %v", err)
	}
	fsys["p/hello.sh"] = &fstest.MapFile{Data: []byte("#!/bin/sh\n")}
	fsys["p/SKILL.md"] = &fstest.MapFile{Data: []byte("---\nname: other\ndescription: d\n---\n")}
	if _, _, err := Load(fsys, "p"); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("a SKILL.md of another name: %v", err)
	}
	delete(fsys, "p/program.toml")
	if _, _, err := Load(fsys, "p"); err == nil || !strings.Contains(err.Error(), "no program.toml") {
		t.Fatalf("no manifest: %v", err)
	}
}

// mapStore is skill.Store in memory; fail makes the save of that key fail.
type mapStore struct {
	m    map[string][]byte
	fail string
}

func (s *mapStore) List(_ context.Context, prefix string, fn func(proto.StateRecord) error) error {
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn(proto.StateRecord{Key: k, Size: int64(len(s.m[k]))}); err != nil {
			return err
		}
	}
	return nil
}

func (s *mapStore) Load(_ context.Context, key string) ([]byte, error) {
	v, ok := s.m[key]
	if !ok {
		return nil, proto.Errorf(proto.ENOENT, "no key %s", key)
	}
	return v, nil
}

func (s *mapStore) Save(_ context.Context, key string, v []byte) error {
	if key == s.fail {
		return proto.Errorf(proto.EPERM, "refused %s", key)
	}
	s.m[key] = v
	return nil
}

func (s *mapStore) Delete(_ context.Context, key string) error {
	delete(s.m, key)
	return nil
}

// TestStore: install, list, get, upgrade in place, a failed install
// undone whole, remove.
func TestStore(t *testing.T) {
	ctx := context.Background()
	st := &mapStore{m: map[string][]byte{"notes/a": []byte("x")}}
	fsys := fstest.MapFS{
		"p/program.toml": {Data: []byte(manifest)},
		"p/SKILL.md":     {Data: []byte("---\nname: hello\ndescription: d\n---\nbody")},
		"p/hello.sh":     {Data: []byte("#!/bin/sh\necho hi\n")},
		"p/old.txt":      {Data: []byte("old")},
	}
	p, files, err := Load(fsys, "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := Install(ctx, st, p, files, Source{From: "/src/p"}, false); err != nil {
		t.Fatal(err)
	}
	if err := Install(ctx, st, p, files, Source{From: "/src/p"}, false); err == nil || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("second install: %v", err)
	}
	list, err := List(ctx, st)
	if err != nil || len(list) != 1 || list[0].Version != "1" || list[0].Source.From != "/src/p" || len(list[0].Files) != 4 || list[0].Source.Digest != Digest(files) {
		t.Fatalf("List: %v %+v", err, list)
	}
	// Version 2 without old.txt; a failed write of it leaves version 1.
	delete(fsys, "p/old.txt")
	fsys["p/program.toml"] = &fstest.MapFile{Data: []byte(strings.Replace(manifest, `version = "1"`, `version = "2"`, 1))}
	p2, files2, _ := Load(fsys, "p")
	st.fail = Key("hello", Manifest)
	if err := Install(ctx, st, p2, files2, Source{From: "/src/p"}, true); err == nil {
		t.Fatal("a failed install reported no error")
	}
	if got, _, err := Get(ctx, st, "hello"); err != nil || got.Version != "1" || string(st.m[Key("hello", "old.txt")]) != "old" {
		t.Fatalf("a failed upgrade was not undone: %v %+v", err, got)
	}
	st.fail = ""
	if err := Install(ctx, st, p2, files2, Source{From: "/src/p"}, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.m[Key("hello", "old.txt")]; ok {
		t.Fatal("the upgrade kept a file the new version lacks")
	}
	got, err := Files(ctx, st, "hello")
	if err != nil || len(got) != 3 {
		t.Fatalf("Files: %v %v", err, got)
	}
	if n, err := Remove(ctx, st, "hello"); err != nil || n != 4 {
		t.Fatalf("Remove: %d %v", n, err)
	}
	var pe *proto.Error
	if _, err := Remove(ctx, st, "hello"); !errors.As(err, &pe) || pe.Code != proto.ENOENT {
		t.Fatalf("second Remove: %v", err)
	}
	if len(st.m) != 1 {
		t.Fatalf("left %v", st.m)
	}
}
