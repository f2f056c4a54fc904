// Package skill reads agent skills: a folder with a SKILL.md (YAML front
// matter with a name and a description, then the instructions) and any
// files the instructions refer to, in the format of the agent-skills
// ecosystem (https://agentskills.io/specification).
//
// An agent's skills live in its versioned state under skills/NAME/, so
// they are policy-checked, audited and committed like the rest of it. The
// LLM runner shows the model each skill's name and description, and loads
// the instructions only when the model asks: a skill costs a line of the
// prompt until it is used.
package skill

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/oxios/oxios/pkg/proto"
)

// Prefix is where an agent's skills live in its state.
const Prefix = "skills/"

// File is the name of a skill's instructions.
const File = "SKILL.md"

// Limits of one skill, so that installing one cannot fill an agent's
// state by accident.
const (
	MaxName        = 64
	MaxDescription = 1024
	MaxFiles       = 100
	MaxBytes       = 8 << 20
)

// Skill is a parsed SKILL.md.
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Fields are the other top-level fields of the front matter (license,
	// compatibility, allowed-tools...), as text.
	Fields map[string]string `json:"fields,omitempty"`
	// Body is the instructions: the Markdown after the front matter.
	Body string `json:"-"`
}

// Key is the state key of file rel of skill name.
func Key(name, rel string) string { return Prefix + name + "/" + rel }

// CheckName reports why name is not a skill name: 1 to 64 of a-z, 0-9 and
// "-", not starting or ending with "-", no "--" (the specification's rule,
// which also makes it a safe state key element).
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("skill name is empty")
	case len(name) > MaxName:
		return fmt.Errorf("skill name %.20q... is %d bytes, more than %d", name, len(name), MaxName)
	case name[0] == '-' || name[len(name)-1] == '-' || strings.Contains(name, "--"):
		return fmt.Errorf("skill name %q: no leading, trailing or double hyphen", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("skill name %q: byte %d (%q) not allowed; names are a-z, 0-9 and -", name, i, c)
		}
	}
	return nil
}

// Parse reads a SKILL.md. The front matter is YAML; this reads the subset
// skills use: top-level "key: value" fields with plain or quoted scalars
// or block scalars (| and >). Nested fields (metadata:) are kept as their
// raw text.
func Parse(b []byte) (*Skill, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%s is not UTF-8 text", File)
	}
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	s = strings.TrimPrefix(s, "\uFEFF")
	if !strings.HasPrefix(s, "---\n") {
		return nil, fmt.Errorf("%s does not start with a front matter (a line ---, name: and description:, a line ---)", File)
	}
	rest := s[4:]
	end := strings.Index(rest, "\n---\n")
	var front string
	switch {
	case end >= 0:
		front, rest = rest[:end+1], rest[end+5:]
	case strings.HasSuffix(rest, "\n---"):
		front, rest = rest[:len(rest)-3], ""
	default:
		return nil, fmt.Errorf("%s: the front matter has no closing --- line", File)
	}
	fields, err := parseFront(front)
	if err != nil {
		return nil, err
	}
	sk := &Skill{Name: fields["name"], Description: strings.TrimSpace(fields["description"]), Body: strings.TrimLeft(rest, "\n")}
	delete(fields, "name")
	delete(fields, "description")
	if len(fields) > 0 {
		sk.Fields = fields
	}
	if err := CheckName(sk.Name); err != nil {
		return nil, fmt.Errorf("%s: %v", File, err)
	}
	switch {
	case sk.Description == "":
		return nil, fmt.Errorf("%s: no description: say what the skill does and when to use it", File)
	case len(sk.Description) > MaxDescription:
		return nil, fmt.Errorf("%s: the description is %d bytes, more than %d", File, len(sk.Description), MaxDescription)
	}
	return sk, nil
}

func parseFront(front string) (map[string]string, error) {
	fields := map[string]string{}
	lines := strings.Split(strings.TrimSuffix(front, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if l[0] == ' ' || l[0] == '\t' {
			return nil, fmt.Errorf("%s: front matter line %d is indented outside a field: %q", File, i+2, l)
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t\"'") {
			return nil, fmt.Errorf("%s: front matter line %d is not key: value: %q", File, i+2, l)
		}
		if _, dup := fields[k]; dup {
			return nil, fmt.Errorf("%s: front matter line %d: %s given twice", File, i+2, k)
		}
		v = strings.TrimSpace(v)
		// The indented lines that follow belong to this field: a block
		// scalar's text, or a nested map kept as it is.
		var block []string
		for i+1 < len(lines) && (lines[i+1] == "" || lines[i+1][0] == ' ' || lines[i+1][0] == '\t') {
			i++
			block = append(block, lines[i])
		}
		switch {
		case v == "|" || v == "|-" || v == ">" || v == ">-":
			text := dedent(block)
			if v[0] == '>' {
				text = fold(text)
			}
			fields[k] = strings.TrimRight(text, "\n")
		case len(block) > 0 && strings.TrimSpace(strings.Join(block, "")) != "":
			if v != "" {
				// A plain scalar continued on the next lines.
				fields[k] = strings.Join(append([]string{v}, trimAll(block)...), " ")
			} else {
				fields[k] = strings.TrimRight(dedent(block), "\n")
			}
		default:
			s, err := scalar(v)
			if err != nil {
				return nil, fmt.Errorf("%s: front matter line %d (%s): %v", File, i+2, k, err)
			}
			fields[k] = s
		}
	}
	return fields, nil
}

func scalar(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, `"`):
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", fmt.Errorf("bad double-quoted string %s", v)
		}
		return s, nil
	case strings.HasPrefix(v, "'"):
		if len(v) < 2 || !strings.HasSuffix(v, "'") {
			return "", fmt.Errorf("bad single-quoted string %s", v)
		}
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'"), nil
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v, nil
}

func trimAll(ls []string) []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// dedent removes the indentation of the block's first non-empty line.
func dedent(ls []string) string {
	ind := -1
	for _, l := range ls {
		if strings.TrimSpace(l) != "" {
			ind = len(l) - len(strings.TrimLeft(l, " \t"))
			break
		}
	}
	var b strings.Builder
	for _, l := range ls {
		if len(l) >= ind && ind >= 0 {
			l = l[ind:]
		} else {
			l = strings.TrimLeft(l, " \t")
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// fold joins the lines of a folded block scalar, keeping blank lines as
// paragraph breaks.
func fold(s string) string {
	var out []string
	for p := range strings.SplitSeq(s, "\n\n") {
		out = append(out, strings.Join(strings.Fields(p), " "))
	}
	return strings.Join(out, "\n")
}

// FileData is one file of a skill.
type FileData struct {
	Path string // relative to the skill's folder, slash-separated
	Data []byte
}

// Load reads the skill in folder dir of fsys: its SKILL.md, parsed, and
// every file (SKILL.md among them), sorted with SKILL.md last so that an
// install that writes them in order makes the skill visible only once it
// is whole. Hidden files and folders (.git) are left out; a symbolic link
// or anything else that is not a regular file is refused.
func Load(fsys fs.FS, dir string) (*Skill, []FileData, error) {
	b, err := fs.ReadFile(fsys, path.Join(dir, File))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: no %s: a skill is a folder with a %s", dir, File, File)
	}
	sk, err := Parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", dir, err)
	}
	var files []FileData
	total := 0
	err = fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if rel == "" {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file (symbolic links are not followed)", dir, rel)
		}
		if perr := proto.CheckKey(Key(sk.Name, rel)); perr != nil {
			return fmt.Errorf("%s: %s: %s", dir, rel, perr.Message)
		}
		if len(files) == MaxFiles {
			return fmt.Errorf("%s: more than %d files", dir, MaxFiles)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if total += len(data); total > MaxBytes {
			return fmt.Errorf("%s: more than %d bytes in all", dir, MaxBytes)
		}
		files = append(files, FileData{Path: rel, Data: data})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.SliceStable(files, func(i, j int) bool {
		if (files[i].Path == File) != (files[j].Path == File) {
			return files[j].Path == File
		}
		return files[i].Path < files[j].Path
	})
	return sk, files, nil
}

// Summary is the line the model sees for a skill before it loads it.
func (s *Skill) Summary() string {
	return "- " + s.Name + ": " + strings.Join(strings.Fields(s.Description), " ")
}

// Split returns the name of the skill a state key belongs to and the
// file's path inside it, or ok false when key is not under Prefix.
func Split(key string) (name, rel string, ok bool) {
	rest, found := strings.CutPrefix(key, Prefix)
	if !found {
		return "", "", false
	}
	name, rel, ok = strings.Cut(rest, "/")
	return name, rel, ok && name != "" && rel != ""
}
