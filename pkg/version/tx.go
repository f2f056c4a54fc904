package version

import (
	"fmt"
	"github.com/oxios/oxios/pkg/durable"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Tx is a commit being prepared: the files it puts and deletes, on top of
// the commit HEAD named when it began. A Tx belongs to one goroutine.
type Tx struct {
	r       *Repo
	parent  oid
	pending map[string]*pending
	// grafts are folders set whole (Graft, DeleteTree): path -> the new
	// entry, mode 0 to remove the folder.
	grafts map[string]treeEntry
	done   bool
}

// pending is the state a transaction gives one path.
type pending struct {
	from oid    // the blob at the path in the parent; zero: none
	to   oid    // the blob to commit; zero: delete
	data []byte // the content of to
}

// CommitOptions describe the commit a transaction makes.
type CommitOptions struct {
	// Message is the subject line, optionally followed by a blank line
	// and a body. It must not be empty.
	Message string
	// Trailers are appended as the message's final paragraph, one
	// "Key: value" line each, as git interpret-trailers writes them.
	Trailers []Trailer
	// Author defaults to "oxiosd <oxiosd@localhost>" now, field by field.
	Author Signature
	// Committer defaults to Author.
	Committer Signature
	// Tag, if set, is a tag to create pointing at the new commit. Commit
	// fails before committing if the name is invalid or taken.
	Tag string
	// AllowEmpty makes a commit even when no file changed.
	AllowEmpty bool
}

// Begin starts a transaction on top of the commit the branch points at
// (the first commit, if it has none). Only one transaction may be open at
// a time: Begin returns ErrBusy while another is, rather than wait,
// because the daemon commits from one goroutine and a transaction left
// open is a bug to report, not to wait out. End every transaction with
// Commit or Abort.
func (r *Repo) Begin() (*Tx, error) {
	if !r.tx.TryLock() {
		return nil, ErrBusy
	}
	if err := r.checkOpen(); err != nil {
		r.tx.Unlock()
		return nil, err
	}
	// The branch is read again: if anything but this Repo moved it (or a
	// commit failed after its rename), the cached tree is stale.
	head, _, err := r.readRef(r.branch)
	if err != nil {
		r.tx.Unlock()
		return nil, err
	}
	if head != r.rootFor {
		r.root, r.rootFor = nil, head
	}
	return &Tx{r: r, parent: head, pending: map[string]*pending{}}, nil
}

// Abort ends the transaction without committing. The repository and its
// cache are as they were. Abort after Commit does nothing.
func (tx *Tx) Abort() {
	if !tx.done {
		tx.done = true
		tx.pending = nil
		tx.r.tx.Unlock()
	}
}

// Put sets the content of the file at path (mode 100644), creating the
// folders on the way. Putting what the parent commit already holds there
// is not a change. Put keeps data, without copying it, until the
// transaction ends: the caller must not modify it meanwhile.
func (tx *Tx) Put(path string, data []byte) error {
	return tx.set(path, hashObject(objBlob, data), data)
}

// Delete removes the file at path. Folders left empty vanish (git stores
// no empty folder). Deleting a path that is not a file is not a change.
func (tx *Tx) Delete(path string) error {
	return tx.set(path, zeroID, nil)
}

func (tx *Tx) set(path string, to oid, data []byte) error {
	if tx.done {
		return ErrTxDone
	}
	if err := CheckPath(path); err != nil {
		return err
	}
	g := tx.graftAbove(path)
	if g == path {
		return fmt.Errorf("%w: %s is a folder this transaction sets whole", ErrBadName, path)
	}
	p := tx.pending[path]
	if p == nil {
		// Below a folder set whole, a file changes the folder set.
		var from oid
		var err error
		if g != "" {
			e := tx.grafts[g]
			from, err = tx.r.lookupIn(&e, path[len(g)+1:])
			tx.grafts[g] = e // its folders are cached in it now
		} else {
			from, err = tx.r.lookup(path)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		p = &pending{from: from}
		tx.pending[path] = p
	}
	p.to, p.data = to, data
	return nil
}

// Changed returns the changes the transaction would commit, sorted by
// path: only paths whose file differs from the parent commit's.
func (tx *Tx) Changed() []PathChange {
	var cs []PathChange
	for path, p := range tx.pending {
		if p.from == p.to {
			continue
		}
		c := PathChange{Path: path, From: p.from.str(), To: p.to.str(), Action: Modified}
		switch {
		case p.from == zeroID:
			c.Action = Added
		case p.to == zeroID:
			c.Action = Deleted
		}
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b PathChange) int { return strings.Compare(a.Path, b.Path) })
	return cs
}

// Commit writes the new objects and moves the branch to a new commit, and
// ends the transaction whatever the outcome. It returns
// ErrNothingToCommit if no file changed (unless o.AllowEmpty).
//
// Durability: the objects (one pack) are fsynced and renamed into place
// before the branch ref is replaced (lock file, fsync, rename, fsync of
// the folder), so after a crash the branch names the old commit or the
// new one, complete. If o.Tag is set the tag is written after the branch:
// a crash in between leaves the commit without its tag, and a failure
// there returns the Commit together with the error.
func (tx *Tx) Commit(o CommitOptions) (Commit, error) {
	p, err := tx.prepare(o)
	if err != nil {
		tx.Abort()
		return Commit{}, err
	}
	return p.write()
}

// Prepared is a commit built and not yet written: its objects and its
// hash are known. Write makes it durable in the repository itself;
// Publish makes it the branch's head at once, its durability the
// caller's (see pending.go); Abort drops it. Each ends the transaction.
type Prepared struct {
	tx      *Tx
	o       CommitOptions
	tagRef  string
	id      oid
	newRoot *dirNode
	objs    *objectSet
	changed []PathChange
	msg     string
}

// Prepare builds the commit the transaction would make, as Commit does,
// without writing anything: see Prepared. A commit that is to be
// published (Prepared.Publish) may not create a tag.
func (tx *Tx) Prepare(o CommitOptions) (*Prepared, error) {
	if o.Tag != "" {
		tx.Abort()
		return nil, fmt.Errorf("%w: a prepared commit creates no tag", ErrBadName)
	}
	p, err := tx.prepare(o)
	if err != nil {
		tx.Abort()
		return nil, err
	}
	return p, nil
}

func (tx *Tx) prepare(o CommitOptions) (*Prepared, error) {
	if tx.done {
		return nil, ErrTxDone
	}
	r := tx.r
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	changed, err := tx.graftChanges()
	if err != nil {
		return nil, err
	}
	changed = append(tx.Changed(), changed...)
	slices.SortFunc(changed, func(a, b PathChange) int { return strings.Compare(a.Path, b.Path) })
	if len(changed) == 0 && !o.AllowEmpty {
		return nil, ErrNothingToCommit
	}
	msg, err := buildMessage(o.Message, o.Trailers)
	if err != nil {
		return nil, err
	}
	if o.Author, err = o.Author.normalize("author"); err != nil {
		return nil, err
	}
	if o.Committer == (Signature{}) {
		o.Committer = o.Author
	} else if o.Committer, err = o.Committer.normalize("committer"); err != nil {
		return nil, err
	}
	tagRef := ""
	if o.Tag != "" {
		if err := CheckTagName(o.Tag); err != nil {
			return nil, err
		}
		tagRef = "refs/tags/" + o.Tag
		if taken, err := r.refExists(tagRef); err != nil || taken {
			if err == nil {
				err = fmt.Errorf("tag %s: %w", o.Tag, ErrExists)
			}
			return nil, err
		}
	}

	// The trie of changed paths, then the new folders bottom up.
	top := &changeDir{}
	objs := &objectSet{db: r.db, seen: map[oid]bool{}}
	for path, e := range tx.grafts {
		top.graft(path, e)
	}
	for _, c := range changed {
		p := tx.pending[c.Path]
		if p == nil {
			continue // a graft
		}
		top.add(c.Path, p)
		if p.to != zeroID {
			objs.add(objBlob, p.to, p.data)
		}
	}
	root, err := r.rootNode()
	if err != nil {
		return nil, err
	}
	newRoot, err := r.build(root, top, "", objs)
	if err != nil {
		return nil, err
	}
	if newRoot == nil {
		newRoot = &dirNode{id: emptyTree}
		objs.add(objTree, emptyTree, nil)
	}
	data := encodeCommit(newRoot.id, tx.parent, o.Author, o.Committer, msg)
	id := hashObject(objCommit, data)
	objs.add(objCommit, id, data)
	return &Prepared{tx: tx, o: o, tagRef: tagRef, id: id, newRoot: newRoot, objs: objs, changed: changed, msg: msg}, nil
}

// Hash is the hash the commit has (and will have once written).
func (p *Prepared) Hash() string { return p.id.String() }

// Abort drops the commit and ends the transaction.
func (p *Prepared) Abort() { p.tx.Abort() }

// describe is the Commit the prepared commit is.
func (p *Prepared) describe() Commit {
	o := p.o
	cd := commitData{tree: p.newRoot.id, author: o.Author, committer: o.Committer, message: p.msg}
	if p.tx.parent != zeroID {
		cd.parents = []oid{p.tx.parent}
	}
	cd.author.When = cd.author.When.Truncate(time.Second)
	cd.committer.When = cd.committer.When.Truncate(time.Second)
	return describe(p.id, cd, p.changed)
}

// write writes the objects (with the published ones not yet written: see
// pending.go) and moves the branch, durably, and ends the transaction.
func (p *Prepared) write() (Commit, error) {
	tx, o, id := p.tx, p.o, p.id
	defer tx.Abort()
	r := tx.r
	// The branch's lock file is written and fsynced while the pack is:
	// the fsyncs overlap. It is renamed over the branch only once the
	// pack is in place, so the branch never names objects a crash lost.
	r.refMu.Lock()
	held := r.pendingObjects()
	list := p.objs.list
	if len(held) > 0 {
		list = append(slices.Clip(list), held...)
	}
	staged := make(chan error, 1)
	var ref *durable.Staged
	go func() {
		var err error
		ref, err = r.stageRef(r.branch, id)
		staged <- err
	}()
	err := r.db.writePack(list)
	if serr := <-staged; err == nil && serr != nil {
		err = fmt.Errorf("commit: %w", serr)
	} else if err != nil {
		err = fmt.Errorf("commit: write objects: %w", err)
	}
	if err == nil {
		err = r.placeRef(r.branch, ref)
		if err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	} else if ref != nil {
		ref.Drop()
	}
	if err == nil {
		r.written(len(held))
	}
	r.refMu.Unlock()
	if err != nil {
		return Commit{}, err
	}
	r.root, r.rootFor = p.newRoot, id
	res := p.describe()

	if p.tagRef != "" {
		// Checked again: Tag may have taken the name meanwhile.
		r.refMu.Lock()
		taken, err := r.refExists(p.tagRef)
		if err == nil && taken {
			err = fmt.Errorf("tag %s: %w", o.Tag, ErrExists)
		}
		if err == nil {
			err = r.writeRef(p.tagRef, id)
		}
		r.refMu.Unlock()
		r.forgetTags()
		if err != nil {
			return res, fmt.Errorf("commit %s made, but tag %s: %w", id, o.Tag, err)
		}
	}
	if err := r.db.rollup(r.maxPacks); err != nil {
		// The commit is durable; the packs are merged at a later commit.
		slog.Warn("version: merging packs failed", "dir", r.dir, "err", err)
	}
	return res, nil
}

// objectSet collects the objects a commit must write: each once, and
// none the repository already has.
type objectSet struct {
	db   *odb
	seen map[oid]bool
	list []object
}

func (s *objectSet) add(t objType, id oid, data []byte) {
	if s.seen[id] {
		return
	}
	s.seen[id] = true
	if !s.db.has(id) {
		s.list = append(s.list, object{typ: t, id: id, data: data})
	}
}

// changeDir is a folder of the trie of a commit's changed paths.
type changeDir struct {
	files  map[string]*pending
	dirs   map[string]*changeDir
	grafts map[string]treeEntry
}

func (d *changeDir) graft(path string, e treeEntry) {
	for {
		name, rest, more := strings.Cut(path, "/")
		if !more {
			if d.grafts == nil {
				d.grafts = map[string]treeEntry{}
			}
			d.grafts[name] = e
			return
		}
		sub := d.dirs[name]
		if sub == nil {
			if d.dirs == nil {
				d.dirs = map[string]*changeDir{}
			}
			sub = &changeDir{}
			d.dirs[name] = sub
		}
		d, path = sub, rest
	}
}

func (d *changeDir) add(path string, p *pending) {
	for {
		name, rest, more := strings.Cut(path, "/")
		if !more {
			if d.files == nil {
				d.files = map[string]*pending{}
			}
			d.files[name] = p
			return
		}
		sub := d.dirs[name]
		if sub == nil {
			if d.dirs == nil {
				d.dirs = map[string]*changeDir{}
			}
			sub = &changeDir{}
			d.dirs[name] = sub
		}
		d, path = sub, rest
	}
}

// rootNode returns the committer's cache of the parent's root folder,
// loading it on first use.
func (r *Repo) rootNode() (*dirNode, error) {
	if r.root != nil {
		return r.root, nil
	}
	if r.rootFor == zeroID {
		r.root = &dirNode{id: emptyTree}
		return r.root, nil
	}
	c, err := r.readCommit(r.rootFor)
	if err != nil {
		return nil, err
	}
	n, err := r.loadDir(c.tree)
	if err != nil {
		return nil, err
	}
	r.root = n
	return n, nil
}

func (r *Repo) loadDir(id oid) (*dirNode, error) {
	data, err := r.db.readType(id, objTree)
	if err != nil {
		return nil, err
	}
	es, err := parseTree(data)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	return &dirNode{id: id, entries: es}, nil
}

// subdir returns the cached folder of a directory entry, loading it on
// first use.
func (r *Repo) subdir(e *treeEntry) (*dirNode, error) {
	if e.sub == nil {
		n, err := r.loadDir(e.id)
		if err != nil {
			return nil, err
		}
		e.sub = n
	}
	return e.sub, nil
}

// lookup returns the blob at path in the parent commit, zero if no file is
// there (nothing, or a folder).
func (r *Repo) lookup(path string) (oid, error) {
	n, err := r.rootNode()
	if err != nil {
		return zeroID, err
	}
	return r.lookupFrom(n, path)
}

// lookupIn returns the blob at path in the folder dir (mode 0: none),
// caching the folders read in dir.
func (r *Repo) lookupIn(dir *treeEntry, path string) (oid, error) {
	if dir.mode == 0 {
		return zeroID, nil
	}
	n, err := r.subdir(dir)
	if err != nil {
		return zeroID, err
	}
	return r.lookupFrom(n, path)
}

func (r *Repo) lookupFrom(n *dirNode, path string) (oid, error) {
	var err error
	for {
		name, rest, more := strings.Cut(path, "/")
		i, ok := findEntry(n.entries, name)
		if !ok {
			return zeroID, nil
		}
		e := &n.entries[i]
		if !more {
			if e.isDir() {
				return zeroID, nil
			}
			return e.id, nil
		}
		if !e.isDir() {
			return zeroID, nil
		}
		if n, err = r.subdir(e); err != nil {
			return zeroID, err
		}
		path = rest
	}
}

// build returns the folder n (nil: a new folder) with the changes of ch
// applied, path being its place ("" or "a/b/"). Only folders that change
// are rebuilt; a folder left empty is nil. New tree objects go to objs.
func (r *Repo) build(n *dirNode, ch *changeDir, path string, objs *objectSet) (*dirNode, error) {
	var old []treeEntry
	if n != nil {
		old = n.entries
	}
	// The new entry of every name that changes; nil: removed.
	next := make(map[string]*treeEntry, len(ch.files)+len(ch.dirs))
	for name, sub := range ch.dirs {
		var base *dirNode
		if g, ok := ch.grafts[name]; ok {
			// Files changed below a folder set whole change that folder.
			if g.mode != 0 {
				var err error
				if base, err = r.subdir(&g); err != nil {
					return nil, err
				}
			}
		} else if i, ok := findEntry(old, name); ok {
			e := &old[i]
			if e.isDir() {
				var err error
				if base, err = r.subdir(e); err != nil {
					return nil, err
				}
			} else if f := ch.files[name]; f == nil || f.to != zeroID {
				return nil, fmt.Errorf("commit: %s%s is a file, so it cannot hold files; delete it in the same commit", path, name)
			}
		}
		nd, err := r.build(base, sub, path+name+"/", objs)
		if err != nil {
			return nil, err
		}
		next[name] = nil
		if nd != nil {
			next[name] = &treeEntry{name: name, mode: modeDir, id: nd.id, sub: nd}
		}
	}
	for name, g := range ch.grafts {
		if i, ok := findEntry(old, name); ok && !old[i].isDir() {
			return nil, fmt.Errorf("commit: %s%s is a file, not a folder to set whole", path, name)
		}
		if _, built := ch.dirs[name]; built {
			continue
		}
		next[name] = nil
		if g.mode != 0 {
			g.name = name
			next[name] = &g
		}
	}
	for name, f := range ch.files {
		if f.to == zeroID {
			if _, done := next[name]; !done {
				next[name] = nil // the change is real, so a file was there
			}
			continue
		}
		cur, done := next[name]
		if !done {
			if i, ok := findEntry(old, name); ok {
				cur = &old[i]
			}
		}
		if cur != nil && cur.isDir() {
			return nil, fmt.Errorf("commit: %s%s is a folder holding files; delete them in the same commit", path, name)
		}
		next[name] = &treeEntry{name: name, mode: modeFile, id: f.to}
	}

	es := make([]treeEntry, 0, len(old)+len(next))
	for _, e := range old {
		if _, ok := next[e.name]; !ok {
			es = append(es, e)
		}
	}
	for _, e := range next {
		if e != nil {
			es = append(es, *e)
		}
	}
	if len(es) == 0 {
		return nil, nil
	}
	slices.SortFunc(es, cmpTreeEntry)
	data := encodeTree(es)
	id := hashObject(objTree, data)
	if n != nil && id == n.id {
		return n, nil
	}
	objs.add(objTree, id, data)
	return &dirNode{id: id, entries: es}, nil
}
