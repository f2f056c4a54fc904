package memindex

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/recall"
)

// Files is the folder of saved recall indexes (DATA/index/recall), one
// file an agent. They are derived data: one that is missing or damaged
// is rebuilt from the memory files (Rebuild).
type Files struct {
	dir      string
	prefetch *prefetch
}

type prefetch struct {
	done chan struct{}
	out  map[string]decoded // by agent; read once done is closed
}

type decoded struct {
	ix  *recall.Index
	seq uint64
	err error
}

// NewFiles returns the folder dir of saved indexes.
func NewFiles(dir string) *Files { return &Files{dir: dir} }

// Save writes agent's index ix, covering audit seq, durably: temp,
// fsync, rename, fsync the folder.
func (f *Files) Save(agent string, ix *recall.Index, seq uint64) error {
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(f.dir, agent)
	return durable.WriteWith(path, path+".tmp", 0o600, func(fl *os.File) error { return Write(fl, ix, seq) })
}

// Agents lists the agents that have a saved index.
func (f *Files) Agents() []string {
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if proto.CheckAgent(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// Prefetch decodes the saved indexes in the background (at a million
// memories each takes seconds, and the caller has other things to open
// meanwhile); Load takes the results until Done.
func (f *Files) Prefetch() {
	p := &prefetch{done: make(chan struct{}), out: map[string]decoded{}}
	f.prefetch = p
	go func() {
		defer close(p.done)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, a := range f.Agents() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var d decoded
				d.ix, d.seq, d.err = f.read(a)
				mu.Lock()
				p.out[a] = d
				mu.Unlock()
			}()
		}
		wg.Wait()
	}()
}

// Done drops what Prefetch decoded.
func (f *Files) Done() { f.prefetch = nil }

// Load returns agent's saved index and the audit seq it covers:
// prefetched, or read now.
func (f *Files) Load(agent string) (*recall.Index, uint64, error) {
	if p := f.prefetch; p != nil {
		<-p.done
		if d, ok := p.out[agent]; ok {
			return d.ix, d.seq, d.err
		}
	}
	return f.read(agent)
}

func (f *Files) read(agent string) (*recall.Index, uint64, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, agent))
	if err != nil {
		return nil, 0, err
	}
	return Decode(b)
}

// Rebuild builds an index from an agent's memory files: keys are their
// keys, load reads one; a file that does not parse is left out and told
// to skipped. It returns the index and how many memories it holds.
func Rebuild(keys []string, load func(key string) ([]byte, error), skipped func(key string, err error)) (*recall.Index, int, error) {
	// Ids sort by creation (and by request order within a request), so
	// the rebuilt index numbers documents as the live one did and breaks
	// ties the same way.
	keys = append([]string(nil), keys...)
	idOf := func(key string) string { _, id, _ := memory.SplitKey(key); return id }
	sort.Slice(keys, func(i, j int) bool { return idOf(keys[i]) < idOf(keys[j]) })
	preps := make([]recall.Prepared, len(keys))
	ok := make([]bool, len(keys))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(keys); i += workers {
				kind, id, good := memory.SplitKey(keys[i])
				if !good {
					continue
				}
				v, err := load(keys[i])
				if err != nil {
					continue
				}
				mm, err := memory.Parse(v)
				if err != nil || mm.ID != id || mm.Kind != kind {
					skipped(keys[i], err)
					continue
				}
				preps[i], ok[i] = recall.Prepare(DocOf(mm, len(v), nil)), true
			}
		}()
	}
	wg.Wait()
	keep := make([]*recall.Prepared, 0, len(preps))
	for i := range preps {
		if ok[i] {
			keep = append(keep, &preps[i])
		}
	}
	ix := recall.New(recall.DefaultParams)
	if err := ix.AddPrepared(keep); err != nil {
		return nil, 0, err
	}
	return ix, len(keep), nil
}
