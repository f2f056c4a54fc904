package version

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Forks in the history: the commit that copies an agent's folder at a
// commit as a new agent's (a graft, with what the fork starts with
// changed below it), finding the point an agent was forked at, and the
// differences between two agents, live state included. The kernel's fork
// syscalls run these on the committer goroutine.

// Trailers of a fork commit.
const (
	TrailerForkOf    = "Oxios-Fork-Of"
	TrailerForkPoint = "Oxios-Fork-Point"
)

// ForkOptions is a fork of agent From at commit Point as agent Name.
type ForkOptions struct {
	From, Name, Point string
	// After, called once the graft is staged, is what the fork changes
	// against it (its budget used reset, its schedules left out), made in
	// the same commit. It may block: the caller works it out while the
	// graft is staged.
	After func() []PathChange
	// Staged, when set, hears before the fork is committed whether it
	// can be: Name's folder is free at HEAD (else ErrExists) and From's
	// is a folder at Point (else ErrUnknownRevision). The caller may wait
	// for it before it copies the agent's live state, while the commit is
	// written and synced.
	Staged func(error)
	// Trailers of the commit.
	Trailers []Trailer
	Author   Signature
	When     time.Time
}

// Fork makes the fork's commit: the graft of From's folder at Point as
// agents/NAME, which must not exist at HEAD, with the changes After
// gives below it. One commit, so one pack and one move of the branch,
// whatever From holds.
func (r *Repo) Fork(o ForkOptions) (Commit, error) {
	p, err := r.PrepareFork(o)
	if err != nil {
		return Commit{}, err
	}
	return p.write()
}

// PrepareFork builds the fork's commit as Fork does, without writing it:
// the kernel writes its record in the journal batch of the fork's live
// copy and publishes it (see pending.go), or drops it if the batch
// fails, so that git never holds a fork the state does not.
func (r *Repo) PrepareFork(o ForkOptions) (*Prepared, error) {
	staged := func(err error) {
		if o.Staged != nil {
			o.Staged(err)
		}
	}
	tx, err := r.Begin()
	if err != nil {
		staged(err)
		return nil, err
	}
	dst := "agents/" + o.Name
	cur, err := r.folderAt(dst)
	if err == nil && cur != zeroID {
		err = fmt.Errorf("%s: %w", dst, ErrExists)
	}
	if err == nil {
		err = tx.Graft(dst, o.Point, "agents/"+o.From)
	}
	staged(err)
	if err != nil {
		tx.Abort()
		return nil, err
	}
	if o.After != nil {
		for _, ch := range o.After() {
			if !strings.HasPrefix(ch.Path, dst+"/") {
				err = fmt.Errorf("%w: a fork changes only its own folder, not %s", ErrBadName, ch.Path)
			} else if ch.Action == Deleted {
				err = tx.Delete(ch.Path)
			} else {
				err = tx.Put(ch.Path, []byte(ch.To))
			}
			if err != nil {
				tx.Abort()
				return nil, err
			}
		}
	}
	return tx.Prepare(CommitOptions{
		Message:   fmt.Sprintf("Fork %s at %s as %s", o.From, o.Point[:12], o.Name),
		Trailers:  o.Trailers,
		Author:    o.Author,
		Committer: Daemon(o.When),
	})
}

// ForkFile is one file a fork starts with: its tree path's space and
// key, and its blob at the fork point.
type ForkFile struct{ Space, Key, Blob string }

// ReadFork reads the values of files, in parallel: of agent's live
// state when live (the agent was just committed, so its values are
// HEAD's, most of them in memory), else (or when the store has none)
// from git.
func (r *Repo) ReadFork(st Store, agent string, files []ForkFile, live bool) ([][]byte, error) {
	vals := make([][]byte, len(files))
	errs := make([]error, len(files))
	read := func(w, workers int) {
		for i := w; i < len(files); i += workers {
			f := files[i]
			if live {
				if v, _, err := st.Load(state.Ref(f.Space, agent), f.Key); err == nil {
					vals[i] = v
					continue
				}
			}
			vals[i], errs[i] = r.ReadBlob(f.Blob)
		}
	}
	if len(files) <= forkReadInline {
		// A fork at the state now reads its budget and schedules: too
		// few to be worth waking goroutines for.
		read(0, 1)
	} else {
		var wg sync.WaitGroup
		workers := runtime.GOMAXPROCS(0)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				read(w, workers)
			}()
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// forkReadInline is how many files ReadFork reads on the caller's
// goroutine; more are read in parallel.
const forkReadInline = 16

// ForkPoint finds the commit agent was forked at and the agent it was
// forked from, walking agent's history to its fork commit.
func (r *Repo) ForkPoint(agent string) (from, point string, err error) {
	stop := errors.New("found")
	err = r.Log("HEAD", "agents/"+agent, 0, func(cm Commit) error {
		var of, at string
		for _, t := range cm.Trailers {
			switch t.Key {
			case TrailerForkOf:
				of = t.Value
			case TrailerForkPoint:
				at = t.Value
			}
		}
		if of != "" && at != "" {
			from, point = of, at
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		return from, point, nil
	}
	if err != nil {
		return "", "", err
	}
	return "", "", proto.Errorf(proto.ENOENT, "agent %q is not a fork; give the agent to compare with (ox-fork diff %s OTHER)", agent, agent)
}

// AgentDiff is the files that differ between other (or agent's fork
// point, when "") and agent, live state included. The committed trees
// are compared first, skipping what both share, then the uncommitted
// paths of either side (under lists them below a prefix) are compared by
// content: the cost is what differs, not the size of the agents. With
// patch each record carries its unified diff.
func (r *Repo) AgentDiff(st Store, under func(prefix string) ([]string, error), agent, other string, patch bool) ([]proto.DiffRecord, error) {
	head, err := r.Head()
	if err != nil {
		return nil, err
	}
	fromAgent, fromRev, live := other, "HEAD", true
	if other == "" {
		if head == "" {
			return nil, proto.Errorf(proto.ENOENT, "agent %q is not a fork", agent)
		}
		if fromAgent, fromRev, err = r.ForkPoint(agent); err != nil {
			return nil, err
		}
		live = false
	}
	changes := map[string]PathChange{}
	if head != "" {
		cs, err := r.DiffFolders(fromRev, "agents/"+fromAgent, "HEAD", "agents/"+agent)
		if err != nil {
			return nil, err
		}
		for _, ch := range cs {
			changes[ch.Path] = ch
		}
	}
	// The uncommitted paths of either side, compared as they are now.
	rels := map[string]bool{}
	sides := []string{agent}
	if live {
		sides = append(sides, fromAgent)
	}
	for _, ag := range sides {
		ps, err := under(AgentPrefix(ag))
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			rels[strings.TrimPrefix(p, AgentPrefix(ag))] = true
		}
	}
	for rel := range rels {
		fh, err := r.blobOf(st, fromRev, fromAgent, rel, live, head != "")
		if err != nil {
			return nil, err
		}
		th, err := r.blobOf(st, "HEAD", agent, rel, true, head != "")
		if err != nil {
			return nil, err
		}
		ch := PathChange{Path: rel, From: fh, To: th, Action: Modified}
		switch {
		case fh == th:
			delete(changes, rel)
			continue
		case fh == "":
			ch.Action = Added
		case th == "":
			ch.Action = Deleted
		}
		changes[rel] = ch
	}
	var out []proto.DiffRecord
	for _, rel := range slices.Sorted(maps.Keys(changes)) {
		ch := changes[rel]
		d := proto.DiffRecord{Type: proto.RecordDiff, Path: rel, Action: ch.Action}
		if patch {
			if d.Patch, err = r.agentPatch(st, ch, fromAgent, agent, fromRev, live); err != nil {
				return nil, err
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// blobOf is the blob hash of agent's file rel ("state/KEY"...): live from
// the store when live and uncommitted, else from rev. "" if none.
func (r *Repo) blobOf(st Store, rev, agent, rel string, live, committed bool) (string, error) {
	v, ok, err := r.contentOf(st, rev, agent, rel, live, committed)
	if err != nil || !ok {
		return "", err
	}
	return BlobHash(v), nil
}

func (r *Repo) contentOf(st Store, rev, agent, rel string, live, committed bool) ([]byte, bool, error) {
	p := AgentPrefix(agent) + rel
	if live {
		space, _, key, ok := SplitSpacePath(p)
		if !ok {
			return nil, false, nil
		}
		v, _, err := st.Load(state.Ref(space, agent), key)
		if err == nil {
			return v, true, nil
		}
		var pe *proto.Error
		if errors.As(err, &pe) && (pe.Code == proto.ENOENT || pe.Code == proto.EISDIR) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if !committed {
		return nil, false, nil
	}
	files, err := r.Files(rev, p)
	if err != nil {
		return nil, false, err
	}
	h, ok := files[p]
	if !ok {
		return nil, false, nil
	}
	v, err := r.ReadBlob(h)
	return v, err == nil, err
}

// agentPatch renders one change between two agents as a unified diff.
func (r *Repo) agentPatch(st Store, ch PathChange, fromAgent, toAgent, fromRev string, live bool) (string, error) {
	from, fok, err := r.contentOf(st, fromRev, fromAgent, ch.Path, live, true)
	if err != nil {
		return "", err
	}
	to, tok, err := r.contentOf(st, "HEAD", toAgent, ch.Path, true, true)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := Unified(w, ch.Path, from, to, fok, tok); err != nil {
		return "", err
	}
	w.Flush()
	return b.String(), nil
}
