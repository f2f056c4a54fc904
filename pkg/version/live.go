package version

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// The live tree: how oxiosd's state maps onto the versioned tree, and
// the walks that compare the two. The kernel runs these on its committer
// goroutine, where no change lands meanwhile.

// Audit trailer keys of commit messages.
const (
	TrailerAuditSeq  = "Oxios-Audit-Seq"
	TrailerAuditHash = "Oxios-Audit-Hash"
)

// SpacePath is the tree path of key in a space of agent: its state or
// its memories (agents/<agent>/mem/<kind>/<id>.md).
func SpacePath(space, agent, key string) string {
	if space == "" {
		space = state.SpaceState
	}
	return "agents/" + agent + "/" + space + "/" + key
}

// SplitSpacePath is SpacePath's inverse, for the spaces the store keeps.
func SplitSpacePath(p string) (space, agent, key string, ok bool) {
	rest, found := strings.CutPrefix(p, "agents/")
	if !found {
		return "", "", "", false
	}
	agent, rest, found = strings.Cut(rest, "/")
	if !found || agent == "" {
		return "", "", "", false
	}
	space, key, found = strings.Cut(rest, "/")
	if !found || key == "" || (space != state.SpaceState && space != state.SpaceMem && space != state.SpaceSys) {
		return "", "", "", false
	}
	return space, agent, key, true
}

// AgentPrefix is the tree prefix of one agent, or of all ("").
func AgentPrefix(agent string) string {
	if agent == "" {
		return "agents/"
	}
	return "agents/" + agent + "/"
}

// Store is the live state as the walks read it.
type Store interface {
	Refs() []string
	List(ref, prefix string) ([]proto.StateRecord, error)
	Load(ref, key string) ([]byte, proto.StateRecord, error)
}

// LoadPath reads the live value at tree path p.
func LoadPath(st Store, p string) ([]byte, error) {
	space, agent, key, _ := SplitSpacePath(p)
	v, _, err := st.Load(state.Ref(space, agent), key)
	return v, err
}

// Rescan returns every path where the live state differs from HEAD, by
// hashing values: the dirty set when it was lost.
func (r *Repo) Rescan(st Store) ([]string, error) {
	head := map[string]string{}
	if h, err := r.Head(); err != nil {
		return nil, err
	} else if h != "" {
		if head, err = r.Files(h, "agents/"); err != nil {
			return nil, err
		}
	}
	var dirty []string
	for _, ref := range st.Refs() {
		recs, err := st.List(ref, "")
		if err != nil {
			continue
		}
		space, a := state.SplitRef(ref)
		for _, rec := range recs {
			p := SpacePath(space, a, rec.Key)
			val, _, err := st.Load(ref, rec.Key)
			if err != nil {
				return nil, err
			}
			if head[p] != BlobHash(val) {
				dirty = append(dirty, p)
			}
			delete(head, p)
		}
	}
	for p := range head {
		if _, _, _, ok := SplitSpacePath(p); ok {
			dirty = append(dirty, p)
		}
	}
	return dirty, nil
}

// Stage puts into tx the live value of each of paths (deleting the ones
// that are no longer a file).
func Stage(tx *Tx, st Store, paths []string) error {
	for _, p := range paths {
		space, agent, key, ok := SplitSpacePath(p)
		if !ok {
			continue
		}
		val, _, lerr := st.Load(state.Ref(space, agent), key)
		var pe *proto.Error
		var err error
		switch {
		case lerr == nil:
			err = tx.Put(p, val)
		case errors.As(lerr, &pe) && (pe.Code == proto.ENOENT || pe.Code == proto.EISDIR):
			err = tx.Delete(p)
		default:
			err = lerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// LiveFiles is the blob hash of every file below prefix as the state is
// now, committed or not: HEAD's, with dirty (the uncommitted paths below
// prefix) read from the state.
func (r *Repo) LiveFiles(st Store, prefix string, dirty []string) (map[string]string, error) {
	files := map[string]string{}
	head, err := r.Head()
	if err != nil {
		return nil, err
	}
	if head != "" {
		if files, err = r.Files("HEAD", prefix); err != nil {
			return nil, err
		}
	}
	for _, p := range dirty {
		space, agent, key, ok := SplitSpacePath(p)
		if !ok {
			continue
		}
		val, _, err := st.Load(state.Ref(space, agent), key)
		if err != nil {
			delete(files, p)
			continue
		}
		files[p] = BlobHash(val)
	}
	return files, nil
}

// Diff is the files below prefix that differ between the commits from
// and to, or, with to "", between from and the state as it is now (under
// lists the uncommitted paths below a prefix). With patch each record
// carries its unified diff, its new side read from st when live.
func (r *Repo) Diff(st Store, under func(prefix string) ([]string, error), from, to, prefix string, patch bool) ([]proto.DiffRecord, error) {
	ff, err := r.Files(from, prefix)
	if err != nil {
		return nil, err
	}
	var tf map[string]string
	if to != "" {
		tf, err = r.Files(to, prefix)
	} else {
		var dirty []string
		if dirty, err = under(prefix); err == nil {
			tf, err = r.LiveFiles(st, prefix, dirty)
		}
	}
	if err != nil {
		return nil, err
	}
	var newSide Store // nil: the new side is read from history
	if to == "" {
		newSide = st
	}
	var out []proto.DiffRecord
	for _, ch := range DiffFiles(ff, tf) {
		d := proto.DiffRecord{Type: proto.RecordDiff, Path: ch.Path, Action: ch.Action}
		if patch {
			if d.Patch, err = r.Patch(ch, newSide); err != nil {
				return nil, err
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// Records emits the records of the commits of rev that changed prefix
// (anything with ""), newest first, at most n (0: all), each with its
// changed paths under prefix and its tags; it stops once ctx ends.
func (r *Repo) Records(ctx context.Context, rev, prefix string, n int, emit func(*proto.CommitRecord) error) error {
	return r.Log(rev, prefix, n, func(cm Commit) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec := Record(cm)
		rec.Changed = OnlyUnder(rec.Changed, prefix)
		rec.Tags = r.TagsAt(cm.Hash)
		return emit(&rec)
	})
}

// ShowRecord is the record of commit rev with its changed paths under
// prefix and its tags.
func (r *Repo) ShowRecord(rev, prefix string) (proto.CommitRecord, error) {
	cm, err := r.Show(rev)
	if err != nil {
		return proto.CommitRecord{}, err
	}
	rec := Record(cm)
	rec.Changed = OnlyUnder(rec.Changed, prefix)
	rec.Tags = r.TagsAt(cm.Hash)
	return rec, nil
}

// Patch renders one change as a unified diff; with st, the new side is
// read from the live state.
func (r *Repo) Patch(ch PathChange, st Store) (string, error) {
	read := func(hash string) ([]byte, error) {
		if hash == "" {
			return nil, nil
		}
		return r.ReadBlob(hash)
	}
	from, err := read(ch.From)
	if err != nil {
		return "", err
	}
	var to []byte
	if st != nil && ch.To != "" {
		to, err = LoadPath(st, ch.Path)
	} else {
		to, err = read(ch.To)
	}
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := Unified(w, ch.Path, from, to, ch.From != "", ch.To != ""); err != nil {
		return "", err
	}
	w.Flush()
	return b.String(), nil
}

// WireError maps a versioning error to the wire.
func WireError(err error) error {
	var pe *proto.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, ErrUnknownRevision):
		// The hint names where revisions are listed (issue 47).
		return proto.Errorf(proto.ENOENT, "%v (ox-commit log lists the commits; HEAD, HEAD~N and tags name them too)", err)
	case errors.Is(err, ErrAmbiguous), errors.Is(err, ErrBadName):
		return proto.Errorf(proto.EINVAL, "%v", err)
	case errors.Is(err, ErrExists):
		return proto.Errorf(proto.EEXIST, "%v", err)
	case proto.OutOfSpace(err):
		return proto.Errorf(proto.ENOSPC, "versioning: %v", err)
	}
	return proto.Errorf(proto.EIO, "versioning: %v", err)
}

// Record is cm as the wire has it, with the audit head of its trailers.
func Record(cm Commit) proto.CommitRecord {
	rec := proto.CommitRecord{
		Type: proto.RecordCommit, Commit: cm.Hash, Parent: cm.Parent,
		Time: cm.Time.UTC().Format(time.RFC3339), Author: cm.Author.Name,
		Message: cm.Message, Changed: make([]proto.PathChange, 0, len(cm.Changed)),
	}
	for _, ch := range cm.Changed {
		rec.Changed = append(rec.Changed, proto.PathChange{Path: ch.Path, Action: ch.Action})
	}
	var h proto.AuditHead
	for _, t := range cm.Trailers {
		switch t.Key {
		case TrailerAuditSeq:
			h.Seq, _ = strconv.ParseUint(t.Value, 10, 64)
		case TrailerAuditHash:
			h.Hash = t.Value
		}
	}
	if h.Hash != "" {
		h.Type = proto.RecordAuditHead
		rec.AuditHead = &h
	}
	return rec
}

// OnlyUnder keeps the changes below prefix.
func OnlyUnder(chs []proto.PathChange, prefix string) []proto.PathChange {
	kept := chs[:0]
	for _, ch := range chs {
		if strings.HasPrefix(ch.Path, prefix) {
			kept = append(kept, ch)
		}
	}
	return kept
}

var userNames sync.Map // uid -> name

// UserName is uid's login name, or uidN.
func UserName(uid uint32) string {
	if n, ok := userNames.Load(uid); ok {
		return n.(string)
	}
	name := "uid" + strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil && u.Username != "" {
		name = u.Username
	}
	userNames.Store(uid, name)
	return name
}

// Author is the signature of uid (acting as agent, if not ""), at when.
func Author(uid uint32, agent string, when time.Time) Signature {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	name := UserName(uid)
	if agent != "" {
		name = agent + " (" + name + ")"
	}
	return Signature{Name: name, Email: UserName(uid) + "@" + host, When: when}
}
