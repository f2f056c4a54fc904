package kernel

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/memindex"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/expiry"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/recall"
	"github.com/oxios/oxios/pkg/state"
)

// The recall indexes are derived data: DATA/index/recall/<agent> holds an
// agent's recall.Index (recall.Save, with the memories' metadata in each
// document's aux, see memindex.Aux), stamped with the audit seq it covers. At start an index is loaded and caught up
// by scanning the audit log after its seq for memory changes, re-reading
// just those files; a missing or damaged index, or one ahead of the log,
// is rebuilt from the files, which are the truth. So is a file of another
// version (OXMEMIX1 kept the metadata in a map of its own after the index).
//
//	file: "OXMEMIX2" | seq u64 | len u64 | recall.Save bytes | crc32c u32

// saveIndex writes m's file durably.
func (k *Kernel) saveIndex(m *memIndex, seq uint64) error { return k.indexes.Save(m.agent, m.ix, seq) }

// saveIndexAsync saves m in the background. The stamp is the seq the index
// covered when the save was asked for; changes that land before the save
// reads the index are in it too, and replaying them at start is harmless
// (catch-up reads each file as it is now). Committer only.
func (k *Kernel) saveIndexAsync(m *memIndex) {
	seq := m.seq
	k.memwg.Add(1)
	go func() {
		defer k.memwg.Done()
		k.memSave.Lock()
		defer k.memSave.Unlock()
		if err := k.saveIndex(m, seq); err != nil {
			k.log.Warn("saving the recall index failed; it will be rebuilt or caught up at the next start", "agent", m.agent, "err", err)
		}
	}()
}

// saveIndexes saves every index; the committer has stopped.
func (k *Kernel) saveIndexes() {
	k.memwg.Wait()
	k.memmu.RLock()
	defer k.memmu.RUnlock()
	for _, m := range k.mems {
		if m.dirty == 0 && m.saved {
			continue
		}
		if err := k.saveIndex(m, m.seq); err != nil {
			k.log.Warn("saving the recall index failed; it will be rebuilt at the next start", "agent", m.agent, "err", err)
		}
	}
}

// loadIndexes makes every agent's recall index ready, before the committer
// starts: load, catch up from the audit log, or rebuild from the files.
func (k *Kernel) loadIndexes() error {
	start := time.Now()
	agents := map[string]bool{}
	for _, ref := range k.state.Refs() {
		if sp, a := state.SplitRef(ref); sp == state.SpaceMem {
			agents[a] = true
		}
	}
	for _, a := range k.indexes.Agents() {
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
			ix, seq, err := k.indexes.Load(a)
			switch {
			case err == nil && seq > k.auditSeq:
				err = fmt.Errorf("it covers audit seq %d, the log ends at %d", seq, k.auditSeq)
			case errors.Is(err, os.ErrNotExist):
			case err != nil:
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					k.log.Warn("recall index unusable; rebuilding it from the memory files", "agent", a, "err", err)
				}
				rebuild = append(rebuild, a)
				return
			}
			k.mems[a] = &memIndex{agent: a, ix: ix, seq: seq, saved: true}
			catchup[a] = seq
		}()
	}
	wg.Wait()
	k.indexes.Done()
	for _, a := range rebuild {
		if err := k.rebuildIndex(a); err != nil {
			return fmt.Errorf("recall index of %s: %w", a, err)
		}
	}
	if err := k.catchUp(catchup); err != nil {
		return err
	}
	var es []expiry.Item
	for _, m := range k.mems {
		m.seq = k.auditSeq
		m.ix.Each(func(in recall.Info) bool {
			if mt, _ := memindex.MetaOf(in); mt.Expires != 0 {
				es = append(es, expiry.Item{At: mt.Expires, Agent: m.agent, ID: strings.Clone(in.ID)})
			}
			return true
		})
	}
	k.ttl.Reset(es)
	if len(k.mems) > 0 {
		n := 0
		for _, m := range k.mems {
			n += m.ix.Len()
		}
		k.log.Info("recall indexes ready", "agents", len(k.mems), "memories", n, "rebuilt", len(rebuild), "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// catchUp applies the memory changes the audit log holds after each
// loaded index's seq, by reading the files they touched as they are now.
func (k *Kernel) catchUp(from map[string]uint64) error {
	if len(from) == 0 {
		return nil
	}
	low := uint64(math.MaxUint64)
	for _, s := range from {
		low = min(low, s)
	}
	if low >= k.auditSeq {
		return nil
	}
	k.audit.Publish(k.auditSeq)
	touched := map[string]map[string]bool{}
	err := k.audit.ScanLines(low+1, func(line []byte) error {
		info, ok := audit.Peek(line)
		if !ok || info.Result != "ok" || info.Op != proto.OpMemRemember && info.Op != proto.OpMemForget {
			return nil
		}
		agent, key, ok := strings.Cut(info.Target, ":")
		if s, loaded := from[agent]; !ok || !loaded || info.Seq <= s {
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
		m := k.mems[agent]
		ref := state.Ref(state.SpaceMem, agent)
		var adds []recall.Prepared
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
			v, _, err := k.state.Load(ref, key)
			var mm *memory.Memory
			if err == nil {
				mm, err = memory.Parse(v)
			}
			if err != nil {
				// Forgotten (or unreadable): out of the index.
				m.ix.Delete(id)
				continue
			}
			adds = append(adds, recall.Prepare(memindex.DocOf(mm, len(v), nil)))
		}
		if err := m.ix.AddPrepared(adds); err != nil {
			return err
		}
		m.dirty += len(keys)
		k.log.Info("recall index caught up from the audit log", "agent", agent, "changed", len(keys))
	}
	return nil
}

// rebuildIndex builds agent's index from its memory files.
func (k *Kernel) rebuildIndex(agent string) error {
	ref := state.Ref(state.SpaceMem, agent)
	recs, _ := k.state.List(ref, "") // an error: no memories
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	ix, n, err := memindex.Rebuild(keys, func(key string) ([]byte, error) {
		v, _, err := k.state.Load(ref, key)
		return v, err
	}, func(key string, err error) {
		k.log.Warn("memory file does not parse; not indexed", "agent", agent, "key", key, "err", err)
	})
	if err != nil {
		return err
	}
	k.mems[agent] = &memIndex{agent: agent, ix: ix, dirty: n + 1}
	return nil
}
