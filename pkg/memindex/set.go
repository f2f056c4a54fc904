package memindex

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/expiry"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/recall"
)

// Set is every agent's recall index, in memory, with its persistence:
// updated by the kernel's committer right after a batch is durable
// (Apply), before any reply, so a recall after a remember's reply sees
// it; saved in the background every SaveEvery changes and at shutdown
// (SaveAll); made ready at start by Load: loaded, caught up from the
// audit log, or rebuilt from the memory files, which are the truth.
//
// The metadata recall filters on is kept in the index with each memory
// (recall.Doc.Aux), so that adds, deletes and filters see both at once
// and no second map by id is needed.
type Set struct {
	files *Files
	log   *slog.Logger

	mu     sync.RWMutex
	ix     map[string]*agentIndex
	wg     sync.WaitGroup // background saves
	saving sync.Mutex     // one save at a time
}

// agentIndex is one agent's recall index.
type agentIndex struct {
	agent string
	ix    *recall.Index
	seq   uint64 // audit seq the index covers (committer only)
	dirty int    // changes since the last save (committer only)
	saved bool   // loaded from or written to its file
}

// OpenSet is the set whose indexes are saved in dir, DATA/index/recall,
// their decoding begun (Prefetch) while the caller opens the rest.
func OpenSet(dir string, log *slog.Logger) *Set {
	files := NewFiles(dir)
	files.Prefetch()
	return NewSet(files, log)
}

// NewSet returns an empty set whose indexes are saved in files.
func NewSet(files *Files, log *slog.Logger) *Set {
	return &Set{files: files, log: log, ix: map[string]*agentIndex{}}
}

// SaveEvery is how many changes an index takes before it is saved in the
// background (besides at shutdown), so a crash replays at most that many
// files at the next start.
const SaveEvery = 200000

// Doc is a memory ready for the committer: analysed, with its expiry.
type Doc struct {
	Prep    recall.Prepared
	Expires int64 // unix nanos, 0 = never
}

// NewDoc is the Doc of a memory whose file is size bytes.
func NewDoc(m *memory.Memory, size int, vec []float32) *Doc {
	d := &Doc{Prep: recall.Prepare(DocOf(m, size, vec))}
	if !m.Expires.IsZero() {
		d.Expires = m.Expires.UnixNano()
	}
	return d
}

// NewDocs are the Docs of mems, whose files are files, with their
// embeddings vecs (nil: none), in order.
func NewDocs(mems []*memory.Memory, files [][]byte, vecs [][]float32) []*Doc {
	docs := make([]*Doc, len(mems))
	for i, m := range mems {
		var vec []float32
		if vecs != nil {
			vec = vecs[i]
		}
		docs[i] = NewDoc(m, len(files[i]), vec)
	}
	return docs
}

// get returns agent's index, creating it when create is set.
func (s *Set) get(agent string, create bool) *agentIndex {
	s.mu.RLock()
	m := s.ix[agent]
	s.mu.RUnlock()
	if m != nil || !create {
		return m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m = s.ix[agent]; m == nil {
		m = &agentIndex{agent: agent, ix: recall.New(recall.DefaultParams)}
		s.ix[agent] = m
	}
	return m
}

// Lookup returns the metadata of agent's memory id.
func (s *Set) Lookup(agent, id string) (Meta, bool) {
	m := s.get(agent, false)
	if m == nil {
		return Meta{}, false
	}
	in, ok := m.ix.Lookup(id)
	if !ok {
		return Meta{}, false
	}
	return MetaOf(in)
}

// Kind returns the kind of agent's memory id, if it exists.
func (s *Set) Kind(agent, id string) (string, bool) {
	mt, ok := s.Lookup(agent, id)
	if !ok {
		return "", false
	}
	return memory.Kinds[mt.Kind], true
}

// Count is how many memories agent holds.
func (s *Set) Count(agent string) int64 {
	m := s.get(agent, false)
	if m == nil {
		return 0
	}
	return int64(m.ix.Len())
}

// Agents are the agents with an index, sorted.
func (s *Set) Agents() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.ix))
}

// Select lists the ids of agent's memories that match f, sorted (ids
// sort by creation time).
func (s *Set) Select(agent string, f Filter) []string {
	m := s.get(agent, false)
	if m == nil {
		return nil
	}
	var ids []string
	m.ix.Each(func(in recall.Info) bool {
		if f.MatchInfo(in) {
			ids = append(ids, in.ID)
		}
		return true
	})
	sort.Strings(ids)
	return ids
}

// IDs lists the ids and file sizes of agent's memories of a kind, by id.
func (s *Set) IDs(agent, kind string) ([]string, []int64) {
	m := s.get(agent, false)
	if m == nil {
		return nil, nil
	}
	ki := KindIndex(kind)
	type idSize struct {
		id   string
		size int64
	}
	var all []idSize
	m.ix.Each(func(in recall.Info) bool {
		if mt, ok := MetaOf(in); ok && mt.Kind == ki {
			all = append(all, idSize{in.ID, int64(mt.Size)})
		}
		return true
	})
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	ids := make([]string, len(all))
	sizes := make([]int64, len(all))
	for i, x := range all {
		ids[i], sizes[i] = x.id, x.size
	}
	return ids, sizes
}

// Hit is a memory recall found, of an agent.
type Hit struct {
	Agent string
	recall.Hit
}

// Search searches the indexes of agents for query (k best of each, with
// f when it filters, text giving a memory's text for the proximity
// signal) and returns the hits of all, best first.
func (s *Set) Search(agents []string, query string, k int, qvec []float32, f Filter, text func(agent, id string) (string, bool)) ([]Hit, error) {
	var all []Hit
	for _, agent := range agents {
		m := s.get(agent, false)
		if m == nil {
			continue
		}
		opt := recall.Options{K: k, QueryVector: qvec}
		opt.Text = func(id string) (string, bool) { return text(agent, id) }
		if f.Any() {
			opt.Filter = f.MatchInfo
		}
		hits, err := m.ix.Search(query, opt)
		if errors.Is(err, recall.ErrEmptyQuery) {
			return nil, proto.Errorf(proto.EINVAL, "recall: the query %.40q has no searchable words", query)
		}
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			all = append(all, Hit{agent, h})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Score > all[j].Score })
	return all, nil
}

// Change is one memory change of a durable batch: the file agent's key
// of the mem space, deleted or written (Value; Doc, when the kernel
// analysed it already).
type Change struct {
	Agent, Key string
	Delete     bool
	Value      []byte
	Doc        *Doc
}

// Apply applies a durable batch's memory changes to the indexes, which
// then cover audit seq, and returns the expiries of the memories added.
// Committer only.
func (s *Set) Apply(chs []Change, seq uint64) []expiry.Item {
	type upd struct {
		m    *agentIndex
		adds []*recall.Prepared
		exps []int64
		dels []string
	}
	var order []*upd
	byAgent := map[string]*upd{}
	for i := range chs {
		ch := &chs[i]
		_, id, ok := memory.SplitKey(ch.Key)
		if !ok {
			continue
		}
		u := byAgent[ch.Agent]
		if u == nil {
			// Room for the rest of the batch: most are one agent's.
			u = &upd{m: s.get(ch.Agent, true), adds: make([]*recall.Prepared, 0, len(chs)-i), exps: make([]int64, 0, len(chs)-i)}
			byAgent[ch.Agent] = u
			order = append(order, u)
		}
		if ch.Delete {
			u.dels = append(u.dels, id)
			continue
		}
		d := ch.Doc
		if d == nil {
			// A restore: the file as it was committed.
			mm, err := memory.Parse(ch.Value)
			if err != nil {
				s.log.Warn("memory file does not parse; not indexed", "agent", ch.Agent, "key", ch.Key, "err", err)
				continue
			}
			d = NewDoc(mm, len(ch.Value), nil)
		}
		u.adds = append(u.adds, &d.Prep)
		u.exps = append(u.exps, d.Expires)
	}
	var expiries []expiry.Item
	for _, u := range order {
		m := u.m
		// Deletes first: a restore may move a memory to another kind.
		m.ix.DeleteMany(u.dels)
		if len(u.adds) > 0 {
			for i, at := range u.exps {
				if at != 0 {
					expiries = append(expiries, expiry.Item{At: at, Agent: m.agent, ID: u.adds[i].ID()})
				}
			}
			if err := m.ix.AddPrepared(u.adds); err != nil {
				s.log.Error("recall index add failed", "agent", m.agent, "err", err)
			}
		}
		m.seq = seq
		m.dirty += len(u.adds) + len(u.dels)
		if m.dirty >= SaveEvery {
			m.dirty = 0
			s.saveAsync(m)
		}
	}
	return expiries
}

// saveAsync saves m in the background. The stamp is the seq the index
// covered when the save was asked for; changes that land before the save
// reads the index are in it too, and replaying them at start is harmless
// (catch-up reads each file as it is now). Committer only.
func (s *Set) saveAsync(m *agentIndex) {
	seq := m.seq
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.saving.Lock()
		defer s.saving.Unlock()
		if err := s.files.Save(m.agent, m.ix, seq); err != nil {
			s.log.Warn("saving the recall index failed; it will be rebuilt or caught up at the next start", "agent", m.agent, "err", err)
		}
	}()
}

// SaveAll saves every index that changed; the committer has stopped.
func (s *Set) SaveAll() {
	s.wg.Wait()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, m := range s.ix {
		if m.dirty == 0 && m.saved {
			continue
		}
		if err := s.files.Save(m.agent, m.ix, m.seq); err != nil {
			s.log.Warn("saving the recall index failed; it will be rebuilt at the next start", "agent", m.agent, "err", err)
		}
	}
}

// Source is what Load reads besides the index files: the memory files
// (the store's mem space) and the audit log.
type Source struct {
	// Agents are the agents with memory files.
	Agents []string
	// Keys lists agent's memory files; Read reads one.
	Keys func(agent string) []string
	Read func(agent, key string) ([]byte, error)
	// Head is the audit log's last seq; Scan calls fn with each entry's
	// line after from.
	Head uint64
	Scan func(from uint64, fn func(line []byte) error) error
}

// Load makes every agent's recall index ready, before the committer
// starts: load, catch up from the audit log, or rebuild from the files.
// It returns the expiries of every memory.
//
// The indexes are derived data: DATA/index/recall/<agent> holds an
// agent's recall.Index (recall.Save, with the memories' metadata in each
// document's aux, see Aux), stamped with the audit seq it covers. A
// loaded index is caught up by scanning the audit log after its seq for
// memory changes, re-reading just those files; a missing or damaged
// index, or one ahead of the log, is rebuilt from the files. So is a
// file of another version (OXMEMIX1 kept the metadata in a map of its
// own after the index).
func (s *Set) Load(src Source) ([]expiry.Item, error) {
	start := time.Now()
	agents := map[string]bool{}
	for _, a := range src.Agents {
		agents[a] = true
	}
	for _, a := range s.files.Agents() {
		agents[a] = true
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		rebuild []string
		catchup = map[string]uint64{}
	)
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix, seq, err := s.files.Load(a)
			if err == nil && seq > src.Head {
				err = fmt.Errorf("it covers audit seq %d, the log ends at %d", seq, src.Head)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					s.log.Warn("recall index unusable; rebuilding it from the memory files", "agent", a, "err", err)
				}
				rebuild = append(rebuild, a)
				return
			}
			s.ix[a] = &agentIndex{agent: a, ix: ix, seq: seq, saved: true}
			catchup[a] = seq
		}()
	}
	wg.Wait()
	s.files.Done()
	for _, a := range rebuild {
		if err := s.rebuild(a, src); err != nil {
			return nil, fmt.Errorf("recall index of %s: %w", a, err)
		}
	}
	if err := s.catchUp(catchup, src); err != nil {
		return nil, err
	}
	var es []expiry.Item
	for _, m := range s.ix {
		m.seq = src.Head
		m.ix.Each(func(in recall.Info) bool {
			if mt, _ := MetaOf(in); mt.Expires != 0 {
				es = append(es, expiry.Item{At: mt.Expires, Agent: m.agent, ID: strings.Clone(in.ID)})
			}
			return true
		})
	}
	if len(s.ix) > 0 {
		n := 0
		for _, m := range s.ix {
			n += m.ix.Len()
		}
		s.log.Info("recall indexes ready", "agents", len(s.ix), "memories", n, "rebuilt", len(rebuild), "took", time.Since(start).Round(time.Millisecond))
	}
	return es, nil
}

// catchUp applies the memory changes the audit log holds after each
// loaded index's seq, by reading the files they touched as they are now.
func (s *Set) catchUp(from map[string]uint64, src Source) error {
	if len(from) == 0 {
		return nil
	}
	low := uint64(math.MaxUint64)
	for _, seq := range from {
		low = min(low, seq)
	}
	if low >= src.Head {
		return nil
	}
	touched := map[string]map[string]bool{}
	err := src.Scan(low+1, func(line []byte) error {
		info, ok := audit.Peek(line)
		if !ok || info.Result != "ok" || info.Op != proto.OpMemRemember && info.Op != proto.OpMemForget {
			return nil
		}
		agent, key, ok := strings.Cut(info.Target, ":")
		if seq, loaded := from[agent]; !ok || !loaded || info.Seq <= seq {
			return nil
		}
		if touched[agent] == nil {
			touched[agent] = map[string]bool{}
		}
		touched[agent][key] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("recall index catch-up: %w", err)
	}
	for agent, keys := range touched {
		m := s.ix[agent]
		var adds []*recall.Prepared
		sorted := make([]string, 0, len(keys))
		for key := range keys {
			sorted = append(sorted, key)
		}
		idOf := func(key string) string { _, id, _ := memory.SplitKey(key); return id }
		sort.Slice(sorted, func(i, j int) bool { return idOf(sorted[i]) < idOf(sorted[j]) })
		for _, key := range sorted {
			_, id, ok := memory.SplitKey(key)
			if !ok {
				continue
			}
			v, err := src.Read(agent, key)
			var mm *memory.Memory
			if err == nil {
				mm, err = memory.Parse(v)
			}
			if err != nil {
				// Forgotten (or unreadable): out of the index.
				m.ix.Delete(id)
				continue
			}
			p := recall.Prepare(DocOf(mm, len(v), nil))
			adds = append(adds, &p)
		}
		if err := m.ix.AddPrepared(adds); err != nil {
			return err
		}
		m.dirty += len(keys)
		s.log.Info("recall index caught up from the audit log", "agent", agent, "changed", len(keys))
	}
	return nil
}

// rebuild builds agent's index from its memory files.
func (s *Set) rebuild(agent string, src Source) error {
	m, err := s.build(agent, src)
	if err == nil {
		s.ix[agent] = m
	}
	return err
}

// build reads agent's memory files into a new index.
func (s *Set) build(agent string, src Source) (*agentIndex, error) {
	ix, n, err := Rebuild(src.Keys(agent), func(key string) ([]byte, error) {
		return src.Read(agent, key)
	}, func(key string, err error) {
		s.log.Warn("memory file does not parse; not indexed", "agent", agent, "key", key, "err", err)
	})
	if err != nil {
		return nil, err
	}
	return &agentIndex{agent: agent, ix: ix, dirty: n + 1}, nil
}

// Rebuild builds agent's index from its memory files (a fork's, whose
// files the live store copied), stamped as covering the audit log up to
// seq, and returns the expiries of its memories. Committer only.
// The files are read without the set's lock: recalls of other agents go
// on meanwhile.
func (s *Set) Rebuild(agent string, src Source, seq uint64) ([]expiry.Item, error) {
	m, err := s.build(agent, src)
	if err != nil {
		return nil, err
	}
	m.seq = seq
	s.mu.Lock()
	s.ix[agent] = m
	s.mu.Unlock()
	var es []expiry.Item
	m.ix.Each(func(in recall.Info) bool {
		if mt, _ := MetaOf(in); mt.Expires != 0 {
			es = append(es, expiry.Item{At: mt.Expires, Agent: agent, ID: strings.Clone(in.ID)})
		}
		return true
	})
	return es, nil
}
