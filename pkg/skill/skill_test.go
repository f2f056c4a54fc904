package skill

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oxios/oxios/share"
)

func TestParse(t *testing.T) {
	sk, err := Parse([]byte("---\r\nname: pdf-tools\r\ndescription: \"Fill PDF forms: use when asked\"\r\nlicense: MIT # the license\r\nmetadata:\r\n  author: ann\r\n  version: \"1\"\r\n---\r\n\r\n# Steps\r\nDo it.\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sk.Name != "pdf-tools" || sk.Description != "Fill PDF forms: use when asked" || sk.Body != "# Steps\nDo it.\n" {
		t.Fatalf("parsed %+v body %q", sk, sk.Body)
	}
	if sk.Fields["license"] != "MIT" || !strings.Contains(sk.Fields["metadata"], "author: ann") {
		t.Fatalf("fields %q", sk.Fields)
	}
	sk, err = Parse([]byte("---\nname: x\ndescription: >\n  folded over\n  two lines\n\n  and a paragraph\n---\nbody"))
	if err != nil || sk.Description != "folded over two lines\nand a paragraph" || sk.Body != "body" {
		t.Fatalf("folded: %v %+v", err, sk)
	}
	sk, err = Parse([]byte("---\nname: x\ndescription: a plain\n  continued line\n---\n"))
	if err != nil || sk.Description != "a plain continued line" {
		t.Fatalf("continued: %v %+v", err, sk)
	}
	for in, want := range map[string]string{
		"no front matter":                                                     "does not start with a front matter",
		"---\nname: x\ndescription: y\n":                                      "no closing ---",
		"---\nname: x\n---\n":                                                 "no description",
		"---\nname: Bad_Name\ndescription: y\n---\n":                          "not allowed",
		"---\nname: -x\ndescription: y\n---\n":                                "hyphen",
		"---\ndescription: y\n---\n":                                          "name is empty",
		"---\nname: x\nname: z\ndescription: y\n---\n":                        "given twice",
		"---\nname: x\ndescription: \"unterminated\n---\n":                    "double-quoted",
		"---\nname: x\n  stray\ndescription: y\n---\n":                        "",
		"---\nname: x\ndescription: " + strings.Repeat("d", 1025) + "\n---\n": "more than 1024",
	} {
		_, err := Parse([]byte(in))
		if want == "" {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%.40q): %v, want an error with %q", in, err, want)
		}
	}
	if _, err := Parse([]byte("---\nname: x\ndescription: y\n---\n\xff")); err == nil {
		t.Error("accepted a SKILL.md that is not UTF-8")
	}
}

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"s/SKILL.md":     {Data: []byte("---\nname: demo\ndescription: a demo\n---\nRead ref/a.md.\n")},
		"s/ref/a.md":     {Data: []byte("a")},
		"s/z.txt":        {Data: []byte("z")},
		"s/.git/config":  {Data: []byte("hidden")},
		"s/.DS_Store":    {Data: []byte("hidden")},
		"bad/SKILL.md":   {Data: []byte("---\nname: bad\ndescription: d\n---\n")},
		"bad/link":       {Data: []byte("/etc/passwd"), Mode: fs.ModeSymlink},
		"none/README.md": {Data: []byte("no skill")},
	}
	sk, files, err := Load(fsys, "s")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	if sk.Name != "demo" || strings.Join(paths, ",") != "ref/a.md,z.txt,SKILL.md" {
		t.Fatalf("Load: %s %v", sk.Name, paths)
	}
	if _, _, err := Load(fsys, "bad"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a symbolic link: %v", err)
	}
	if _, _, err := Load(fsys, "none"); err == nil || !strings.Contains(err.Error(), "no SKILL.md") {
		t.Fatalf("no SKILL.md: %v", err)
	}
	many := fstest.MapFS{"m/SKILL.md": {Data: []byte("---\nname: m\ndescription: d\n---\n")}}
	for i := 0; i <= MaxFiles; i++ {
		many["m/f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("0", i/26)] = &fstest.MapFile{Data: []byte("x")}
	}
	if _, _, err := Load(many, "m"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("too many files: %v", err)
	}
}

// TestShipped: the skills in share/skills are valid, each named as its
// folder.
func TestShipped(t *testing.T) {
	ents, err := fs.ReadDir(share.Skills, "skills")
	if err != nil || len(ents) == 0 {
		t.Fatalf("no shipped skills: %v", err)
	}
	for _, e := range ents {
		sk, _, err := Load(share.Skills, "skills/"+e.Name())
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if sk.Name != e.Name() {
			t.Errorf("skill %s lives in folder %s", sk.Name, e.Name())
		}
	}
}

func TestSplit(t *testing.T) {
	if n, r, ok := Split("skills/a/ref/b.md"); !ok || n != "a" || r != "ref/b.md" {
		t.Fatal(n, r, ok)
	}
	for _, k := range []string{"notes/a", "skills/a", "skills//x"} {
		if _, _, ok := Split(k); ok {
			t.Errorf("Split(%q) ok", k)
		}
	}
}
