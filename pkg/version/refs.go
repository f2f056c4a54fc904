package version

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/oxios/oxios/pkg/durable"
)

// maxSymrefDepth bounds chains of symbolic refs, as git does.
const maxSymrefDepth = 5

// readRef returns the object a ref names ("refs/heads/main",
// "refs/tags/v1", "HEAD"), following symbolic refs; ok is false when the
// ref does not exist. A loose ref file wins over packed-refs, as in git.
func (r *Repo) readRef(name string) (id oid, ok bool, err error) {
	for range maxSymrefDepth {
		if name == r.branch {
			if h, ok := r.pendingHead(); ok {
				return h, true, nil // published, not yet written
			}
		}
		b, err := os.ReadFile(filepath.Join(r.gitDir, filepath.FromSlash(name)))
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR):
			pr, err := r.packedRefs()
			if err != nil {
				return id, false, err
			}
			p, ok := pr[name]
			return p.id, ok, nil
		case err != nil:
			return id, false, err
		}
		s := strings.TrimSpace(string(b))
		if target, ok := strings.CutPrefix(s, "ref: "); ok {
			name = target
			continue
		}
		id, ok := parseID(s)
		if !ok {
			return id, false, fmt.Errorf("ref %s: cannot parse %q", name, s)
		}
		return id, true, nil
	}
	return id, false, fmt.Errorf("ref %s: symbolic refs nested too deep", name)
}

// packedRef is a line of packed-refs: the ref's object and, for an
// annotated tag, the object it peels to.
type packedRef struct{ id, peeled oid }

// packedRefs reads .git/packed-refs (absent: none). Only `git pack-refs`
// or `git gc` writes it; this package writes loose refs.
func (r *Repo) packedRefs() (map[string]packedRef, error) {
	b, err := os.ReadFile(filepath.Join(r.gitDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	refs := map[string]packedRef{}
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || line[0] == '#':
		case line[0] == '^':
			if id, ok := parseID(line[1:]); ok && last != "" {
				p := refs[last]
				p.peeled = id
				refs[last] = p
			}
		default:
			h, name, ok := strings.Cut(line, " ")
			id, okID := parseID(h)
			if !ok || !okID {
				return nil, fmt.Errorf("packed-refs: cannot parse %q", line)
			}
			refs[name] = packedRef{id: id}
			last = name
		}
	}
	return refs, nil
}

// writeRef points the ref name at id: a lock file beside it (git's name
// for the temp file, so git waits for us rather than racing), fsynced,
// renamed over the ref, the folder fsynced.
func (r *Repo) writeRef(name string, id oid) error {
	st, err := r.stageRef(name, id)
	if err != nil {
		return err
	}
	return r.placeRef(name, st)
}

// stageRef writes and fsyncs the lock file of ref name pointing at id,
// not yet renamed over the ref: a commit stages its branch while its
// pack is synced, so the two fsyncs overlap, and places it after.
func (r *Repo) stageRef(name string, id oid) (*durable.Staged, error) {
	path := filepath.Join(r.gitDir, filepath.FromSlash(name))
	if err := durable.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("ref %s: %w", name, err)
	}
	st, err := durable.Stage(path, path+".lock", []byte(id.String()+"\n"), 0o644)
	if err != nil {
		return nil, fmt.Errorf("ref %s: %w", name, err)
	}
	return st, nil
}

// placeRef renames the staged lock file of ref name over it.
func (r *Repo) placeRef(name string, st *durable.Staged) error {
	if err := st.Place(); err != nil {
		return fmt.Errorf("ref %s: %w", name, err)
	}
	return nil
}

// refExists reports whether ref name exists, loose or packed, or whether
// a ref in its way does (refs/tags/a blocks refs/tags/a/b and the reverse).
func (r *Repo) refExists(name string) (bool, error) {
	if _, ok, err := r.readRef(name); err != nil || ok {
		return ok, err
	}
	st, err := os.Stat(filepath.Join(r.gitDir, filepath.FromSlash(name)))
	if err == nil && st.IsDir() {
		return true, nil
	}
	for dir := filepath.Dir(name); dir != "refs/tags" && dir != "refs/heads" && dir != "." && dir != "refs"; dir = filepath.Dir(dir) {
		if _, ok, err := r.readRef(dir); err != nil || ok {
			return ok, err
		}
	}
	pr, err := r.packedRefs()
	if err != nil {
		return false, err
	}
	for other := range pr {
		if strings.HasPrefix(other, name+"/") {
			return true, nil
		}
	}
	return false, nil
}

// CheckTagName reports why name cannot be a tag, or nil: the rules of `git
// check-ref-format` for refs/tags/NAME, and no leading '-' (`git tag`
// refuses it too).
func CheckTagName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: tag name is empty", ErrBadName)
	}
	if err := plumbing.ReferenceName("refs/tags/" + name).Validate(); err != nil {
		return fmt.Errorf("%w: %q is not a valid tag name (see git check-ref-format)", ErrBadName, name)
	}
	return nil
}

// listTags returns every tag (name without refs/tags/) and the object it
// names, loose and packed.
func (r *Repo) listTags() (map[string]oid, error) {
	tags := map[string]oid{}
	pr, err := r.packedRefs()
	if err != nil {
		return nil, err
	}
	for name, p := range pr {
		if t, ok := strings.CutPrefix(name, "refs/tags/"); ok {
			tags[t] = p.id
		}
	}
	root := filepath.Join(r.gitDir, "refs", "tags")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(path, ".lock") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if id, ok := parseID(strings.TrimSpace(string(b))); ok {
			tags[filepath.ToSlash(rel)] = id
		}
		return nil
	})
	return tags, err
}
