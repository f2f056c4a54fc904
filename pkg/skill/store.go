package skill

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/oxios/oxios/pkg/proto"
)

// Store is the state syscalls of one agent that skills are kept with.
type Store interface {
	List(ctx context.Context, prefix string, fn func(proto.StateRecord) error) error
	Load(ctx context.Context, key string) ([]byte, error)
	Save(ctx context.Context, key string, value []byte) error
	Delete(ctx context.Context, key string) error
}

// Installed is a skill in an agent's state.
type Installed struct {
	*Skill
	Files []string // paths inside the skill's folder, sorted
	Size  int64
	// Err says why the skill's SKILL.md is missing or does not parse.
	Err error
}

// List returns the agent's skills, sorted by name: every folder under
// skills/, each with its SKILL.md parsed (or Err set).
func List(ctx context.Context, st Store) ([]*Installed, error) {
	byName := map[string]*Installed{}
	err := st.List(ctx, Prefix, func(r proto.StateRecord) error {
		name, rel, ok := Split(r.Key)
		if !ok {
			return nil
		}
		in := byName[name]
		if in == nil {
			in = &Installed{Skill: &Skill{Name: name}}
			byName[name] = in
		}
		in.Files = append(in.Files, rel)
		in.Size += r.Size
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Installed, 0, len(byName))
	for name, in := range byName {
		sort.Strings(in.Files)
		b, err := st.Load(ctx, Key(name, File))
		switch {
		case isCode(err, proto.ENOENT):
			in.Err = fmt.Errorf("skills/%s has no %s (an install that did not finish? ox-skill rm %s)", name, File, name)
		case err != nil:
			in.Err = err
		default:
			sk, perr := Parse(b)
			switch {
			case perr != nil:
				in.Err = fmt.Errorf("skills/%s: %v", name, perr)
			case sk.Name != name:
				in.Err = fmt.Errorf("skills/%s: its %s names it %q", name, File, sk.Name)
			default:
				in.Skill = sk
			}
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns one installed skill with its instructions.
func Get(ctx context.Context, st Store, name string) (*Skill, error) {
	if err := CheckName(name); err != nil {
		return nil, proto.Errorf(proto.EINVAL, "%v", err)
	}
	b, err := st.Load(ctx, Key(name, File))
	if isCode(err, proto.ENOENT) {
		return nil, proto.Errorf(proto.ENOENT, "no skill %s (ox-skill ls lists them)", name)
	}
	if err != nil {
		return nil, err
	}
	sk, perr := Parse(b)
	if perr != nil {
		return nil, proto.Errorf(proto.EINVAL, "skills/%s: %v", name, perr)
	}
	return sk, nil
}

// Install writes a skill's files into the agent's state, SKILL.md last so
// the skill is listed only once it is whole. An installed skill of the
// same name is refused (EEXIST) unless replace; replacing removes the old
// files the new version does not have. If a write fails, what was written
// is undone (the old version put back), so nothing is half-installed.
func Install(ctx context.Context, st Store, sk *Skill, files []FileData, replace bool) error {
	err := WriteTree(ctx, st, Prefix+sk.Name+"/", files, replace)
	if isCode(err, proto.EEXIST) {
		return proto.Errorf(proto.EEXIST, "agent has a skill %s already (--force replaces it)", sk.Name)
	}
	return err
}

// WriteTree writes files, in their order, as the keys under prefix (a
// folder of the agent's state, ending in "/": skills/NAME/,
// programs/NAME/). Keys under prefix already are refused (EEXIST) unless
// replace; replacing removes those the new files lack. If a write fails,
// what was written is undone (the old keys put back), so nothing is half
// written.
func WriteTree(ctx context.Context, st Store, prefix string, files []FileData, replace bool) error {
	old := map[string][]byte{}
	err := st.List(ctx, prefix, func(r proto.StateRecord) error {
		old[r.Key] = nil
		return nil
	})
	if err != nil && !isCode(err, proto.ENOENT) { // ENOENT: a new agent
		return err
	}
	if len(old) > 0 && !replace {
		return proto.Errorf(proto.EEXIST, "the agent's state has %s already", prefix)
	}
	for k := range old {
		v, err := st.Load(ctx, k)
		if err != nil {
			return err
		}
		old[k] = v
	}
	var written []string
	undo := func(cause error) error {
		// Cancelled or not, the undo must run to the end.
		ctx := context.WithoutCancel(ctx)
		var errs []error
		for _, k := range written {
			if v, was := old[k]; was {
				errs = append(errs, st.Save(ctx, k, v))
			} else {
				errs = append(errs, st.Delete(ctx, k))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("%w; undoing the partial install failed too: %v", cause, err)
		}
		return cause
	}
	keep := map[string]bool{}
	for _, f := range files {
		k := prefix + f.Path
		keep[k] = true
		if err := st.Save(ctx, k, f.Data); err != nil {
			return undo(err)
		}
		written = append(written, k)
	}
	for k := range old {
		if keep[k] {
			continue
		}
		if err := st.Delete(ctx, k); err != nil && !isCode(err, proto.ENOENT) {
			return undo(err)
		}
		// The undo puts a deleted old file back as it does an overwritten one.
		written = append(written, k)
	}
	return nil
}

// Remove deletes every file of a skill and returns how many there were.
func Remove(ctx context.Context, st Store, name string) (int, error) {
	if err := CheckName(name); err != nil {
		return 0, proto.Errorf(proto.EINVAL, "%v", err)
	}
	n, err := RemoveTree(ctx, st, Prefix+name+"/", File)
	if n == 0 && err == nil {
		return 0, proto.Errorf(proto.ENOENT, "no skill %s (ox-skill ls lists them)", name)
	}
	return n, err
}

// RemoveTree deletes every key under prefix, first (the file that makes
// the folder whole, SKILL.md or program.toml) before the others, so that
// a removal cut short leaves nothing listed as whole; it returns how many
// keys it deleted (0 and no error: there were none).
func RemoveTree(ctx context.Context, st Store, prefix, first string) (int, error) {
	var keys []string
	err := st.List(ctx, prefix, func(r proto.StateRecord) error {
		keys = append(keys, r.Key)
		return nil
	})
	if err != nil && !isCode(err, proto.ENOENT) {
		return 0, err
	}
	sort.SliceStable(keys, func(i, j int) bool { return keys[i] == prefix+first && keys[j] != prefix+first })
	for i, k := range keys {
		if err := st.Delete(ctx, k); err != nil && !isCode(err, proto.ENOENT) {
			return i, err
		}
	}
	return len(keys), nil
}

func isCode(err error, code string) bool {
	var pe *proto.Error
	return errors.As(err, &pe) && pe.Code == code
}
