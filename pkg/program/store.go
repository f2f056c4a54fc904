package program

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/skill"
)

// Source says where an installed program came from, kept beside it
// (Meta) so that upgrade knows where to look again.
type Source struct {
	// From is the folder (absolute) or git URL it was installed from, or
	// "shared" for one shipped with Oxios.
	From string `json:"from"`
	// Commit is the git commit of a program installed from a git
	// repository.
	Commit  string `json:"commit,omitempty"`
	Version string `json:"version"`
	// Digest is the BLAKE3 hash of the program's files as installed.
	Digest string `json:"digest"`
}

// Installed is a program in an agent's state.
type Installed struct {
	*Program
	Name   string
	Source Source
	Files  []string // paths inside the program's folder, sorted
	Size   int64
	// Err says why the program's program.toml is missing or does not
	// parse.
	Err error
}

// Key is the state key of file rel of program name.
func Key(name, rel string) string { return Prefix + name + "/" + rel }

// Digest is the BLAKE3 hash of files (paths and contents), what an
// upgrade compares.
func Digest(files []skill.FileData) string {
	sorted := append([]skill.FileData(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	h := blake3.New(32, nil)
	for _, f := range sorted {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Path, len(f.Data))
		h.Write(f.Data)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// List returns the agent's programs, sorted by name: every folder under
// programs/, each with its program.toml parsed (or Err set).
func List(ctx context.Context, st skill.Store) ([]*Installed, error) {
	byName := map[string]*Installed{}
	err := st.List(ctx, Prefix, func(r proto.StateRecord) error {
		rest, _ := strings.CutPrefix(r.Key, Prefix)
		name, rel, ok := strings.Cut(rest, "/")
		if !ok || name == "" || rel == "" {
			return nil
		}
		in := byName[name]
		if in == nil {
			in = &Installed{Name: name}
			byName[name] = in
		}
		if rel != Meta {
			in.Files = append(in.Files, rel)
			in.Size += r.Size
		}
		return nil
	})
	if err != nil && !isCode(err, proto.ENOENT) {
		return nil, err
	}
	out := make([]*Installed, 0, len(byName))
	for name, in := range byName {
		sort.Strings(in.Files)
		p, src, err := get(ctx, st, name)
		in.Program, in.Err = p, err
		if src != nil {
			in.Source = *src
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns one installed program and where it came from.
func Get(ctx context.Context, st skill.Store, name string) (*Program, Source, error) {
	if err := CheckName(name); err != nil {
		return nil, Source{}, proto.Errorf(proto.EINVAL, "%v", err)
	}
	p, src, err := get(ctx, st, name)
	var s Source
	if src != nil {
		s = *src
	}
	return p, s, err
}

func get(ctx context.Context, st skill.Store, name string) (*Program, *Source, error) {
	b, err := st.Load(ctx, Key(name, Manifest))
	if isCode(err, proto.ENOENT) {
		return nil, nil, proto.Errorf(proto.ENOENT, "no program %s (ox-program ls lists them; an install that did not finish? ox-program rm %[1]s)", name)
	}
	if err != nil {
		return nil, nil, err
	}
	p, perr := Parse(b)
	if perr != nil {
		return nil, nil, proto.Errorf(proto.EINVAL, "programs/%s: %v", name, perr)
	}
	if p.Name != name {
		return nil, nil, proto.Errorf(proto.EINVAL, "programs/%s: its %s names it %q", name, Manifest, p.Name)
	}
	var src *Source
	if mb, err := st.Load(ctx, Key(name, Meta)); err == nil {
		var s Source
		if json.Unmarshal(mb, &s) == nil {
			src = &s
		}
	}
	return p, src, nil
}

// Install writes the program's files into the agent's state with the
// record of its source, program.toml last so the program is listed only
// once it is whole. An installed program of the same name is refused
// (EEXIST) unless replace (an upgrade). A failed write undoes what was
// written.
func Install(ctx context.Context, st skill.Store, p *Program, files []skill.FileData, src Source, replace bool) error {
	src.Version, src.Digest = p.Version, Digest(files)
	meta, _ := json.Marshal(src)
	// The record of the source before the files, program.toml still last.
	all := append([]skill.FileData{{Path: Meta, Data: meta}}, files...)
	err := skill.WriteTree(ctx, st, Prefix+p.Name+"/", all, replace)
	if isCode(err, proto.EEXIST) {
		return proto.Errorf(proto.EEXIST, "agent has a program %s already (ox-program upgrade %[1]s replaces it)", p.Name)
	}
	return err
}

// Remove deletes every file of a program and returns how many there were.
func Remove(ctx context.Context, st skill.Store, name string) (int, error) {
	if err := CheckName(name); err != nil {
		return 0, proto.Errorf(proto.EINVAL, "%v", err)
	}
	n, err := skill.RemoveTree(ctx, st, Prefix+name+"/", Manifest)
	if n == 0 && err == nil {
		return 0, proto.Errorf(proto.ENOENT, "no program %s (ox-program ls lists them)", name)
	}
	return n, err
}

// Files returns the files of an installed program (not its record of
// source), read from the agent's state.
func Files(ctx context.Context, st skill.Store, name string) ([]skill.FileData, error) {
	var keys []string
	err := st.List(ctx, Prefix+name+"/", func(r proto.StateRecord) error {
		keys = append(keys, r.Key)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []skill.FileData
	for _, k := range keys {
		rel := strings.TrimPrefix(k, Prefix+name+"/")
		if rel == Meta {
			continue
		}
		v, err := st.Load(ctx, k)
		if err != nil {
			return nil, err
		}
		out = append(out, skill.FileData{Path: rel, Data: v})
	}
	return out, nil
}

func isCode(err error, code string) bool {
	var pe *proto.Error
	return errors.As(err, &pe) && pe.Code == code
}
