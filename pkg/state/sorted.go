package state

import (
	"slices"
	"strings"
	"sync"

	"github.com/oxios/oxios/pkg/proto"
)

// Listing in key order. The index is a hash map: listing an agent of a
// million keys by collecting and sorting them all took 1.3 s at 100,000
// keys before its first record (issue 51). So each tree keeps its keys
// sorted as well, built on the first listing and kept since: a new key
// is noted (added) and merged in at the next listing (a sort of the new
// keys, a merge of the two), a removed one stays until a listing finds
// more removed keys than live ones and rebuilds. A listing then finds its
// prefix by binary search and streams records from there, looking each
// key up in the map, so its first record comes at once at any size.
//
// Without a built order (the first listing after a start from a walk of
// the tree, or after a fork installed a whole index), a listing collects
// the keys below its prefix and sorts them as it emits them (lazy
// quicksort: the first record after O(n), all of them in O(n log n)),
// and keeps the order once it has emitted all.
//
// The order costs a string header a key (16 bytes, the key's bytes are
// the map's), and nothing for trees never listed.

// keyOrder is a tree's keys in sorted order. Guarded as commented.
type keyOrder struct {
	mu sync.Mutex // serializes listings' rebuilds and merges
	// Under mu. sorted: keys in order, possibly some removed since;
	// stale counts those (at most); building: a listing is sorting every
	// key to make sorted.
	sorted   []string
	extra    []string // keys added since sorted was built, sorted
	stale    int
	building bool
	builds   int // how many times it was built by a listing (tests)
	// Under the agent's lock. valid: sorted (with added) holds every
	// key; added: keys added since, not sorted; removed: keys removed
	// since; gen counts resets, so a listing that read the tree before
	// one does not install its order.
	valid   bool
	added   []string
	removed int
	gen     uint64
}

// noteAdded records a new key of a. With a.mu held.
func (a *agent) noteAdded(key string) {
	o := &a.order
	if !o.valid {
		return
	}
	o.added = append(o.added, key)
	if len(o.added) > 4096 && len(o.added) > len(a.keys)/2 {
		// Most of the tree is new since the last listing: the next one
		// rebuilds rather than this list growing with the tree.
		a.resetOrder()
	}
}

// noteRemoved records a removed key of a. With a.mu held.
func (a *agent) noteRemoved() {
	if a.order.valid {
		a.order.removed++
	}
}

// resetOrder drops a's key order: its keys were replaced as a whole. With
// a.mu held.
func (a *agent) resetOrder() {
	a.order.valid, a.order.added, a.order.removed = false, nil, 0
	a.order.gen++
}

// setOrder makes keys (sorted, every key of a) a's key order. With a.mu
// held; a's order is not built.
func (a *agent) setOrder(keys []string) {
	a.order.sorted, a.order.extra, a.order.stale = keys, nil, 0
	a.order.valid, a.order.added, a.order.removed = true, nil, 0
}

// Each calls fn with the record of each key of agentName at or below
// prefix (a folder or a key; "" for all), in key order, and stops at
// fn's first error, which it returns. Records are read as fn is called:
// a key changed meanwhile may be seen as it was or as it is, and one
// removed meanwhile is left out.
func (s *Store) Each(agentName, prefix string, fn func(proto.StateRecord) error) error {
	a := s.agent(agentName)
	if a == nil {
		return proto.NoAgent(agentName)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	o := &a.order
	o.mu.Lock()
	if o.building {
		// Another listing is building the order: this one sorts its own.
		o.mu.Unlock()
		return a.emitUnsorted(agentName, prefix, false, fn)
	}
	a.mu.Lock()
	valid, added, removed := o.valid, o.added, o.removed
	o.added, o.removed = nil, 0
	a.mu.Unlock()
	if valid {
		o.stale += removed
		if len(added) > 0 {
			// New keys wait in extra, merged into sorted only once they
			// are many: a listing after a few new keys copies nothing.
			slices.Sort(added)
			o.extra = mergeKeys(o.extra, slices.Compact(added))
			if len(o.extra) > max(4096, len(o.sorted)/64) {
				o.sorted, o.extra = mergeKeys(o.sorted, o.extra), nil
			}
		}
		if o.stale <= len(o.sorted)/2 || o.stale <= 1024 {
			keys, extra := o.sorted, o.extra
			o.mu.Unlock()
			return a.emitSorted(agentName, prefix, keys, extra, fn)
		}
		// Mostly removed keys: rebuilt.
	}
	o.building = true
	o.mu.Unlock()
	return a.emitUnsorted(agentName, prefix, true, fn)
}

// emitSorted emits the records of the keys of two sorted lists at or
// below prefix, merged in order (a key in both once).
func (a *agent) emitSorted(agentName, prefix string, keys, extra []string, fn func(proto.StateRecord) error) error {
	i, j := 0, 0
	if prefix != "" {
		if rec, ok := a.record(agentName, prefix); ok {
			if err := fn(rec); err != nil {
				return err
			}
		}
		prefix += "/"
		i, _ = slices.BinarySearch(keys, prefix)
		j, _ = slices.BinarySearch(extra, prefix)
	}
	for {
		var k string
		switch {
		case i < len(keys) && (j == len(extra) || keys[i] <= extra[j]):
			k = keys[i]
			if j < len(extra) && extra[j] == k {
				j++
			}
			i++
		case j < len(extra):
			k = extra[j]
			j++
		default:
			return nil
		}
		if !strings.HasPrefix(k, prefix) {
			// Both lists are past the prefix's keys: the smaller head
			// is.
			return nil
		}
		if rec, ok := a.record(agentName, k); ok {
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
}

// emitUnsorted collects the keys at or below prefix and emits them as it
// sorts them. With build (a.order.building is set, by this listing), it
// collects every key, installs their order once sorted, and ends the
// building; a reset of the order meanwhile (a.order.gen) drops it.
func (a *agent) emitUnsorted(agentName, prefix string, build bool, fn func(proto.StateRecord) error) error {
	o := &a.order
	a.mu.Lock()
	keys := make([]string, 0, len(a.keys))
	for k := range a.keys {
		if build || prefix == "" || k == prefix || len(k) > len(prefix) && k[len(prefix)] == '/' && k[:len(prefix)] == prefix {
			keys = append(keys, k)
		}
	}
	gen := o.gen
	if build {
		// From here on new keys are noted, to be merged at the next
		// listing into the order installed below.
		o.valid, o.added, o.removed = true, nil, 0
	}
	a.mu.Unlock()
	var ferr error
	if build {
		// Every key is sorted, for the order; those at or below prefix
		// are emitted on the way.
		under := prefix + "/"
		lazySort(keys, func(k string) bool {
			if ferr != nil {
				return true
			}
			if prefix == "" || k == prefix || strings.HasPrefix(k, under) {
				if rec, ok := a.record(agentName, k); ok {
					ferr = fn(rec)
				}
			}
			return true
		})
		o.mu.Lock()
		a.mu.RLock()
		if o.gen == gen {
			o.sorted, o.extra, o.stale = keys, nil, 0
			o.builds++
		}
		a.mu.RUnlock()
		o.building = false
		o.mu.Unlock()
		return ferr
	}
	lazySort(keys, func(k string) bool {
		if rec, ok := a.record(agentName, k); ok {
			ferr = fn(rec)
		}
		return ferr == nil
	})
	return ferr
}

// record is the record of key, if a has it.
func (a *agent) record(agentName, key string) (proto.StateRecord, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	e := a.keys[key]
	if e == nil {
		return proto.StateRecord{}, false
	}
	rec := proto.StateRecord{Type: proto.RecordState, Agent: agentName, Key: key, Size: e.size, Modified: e.modTime()}
	a.fillMeta(key, &rec)
	return rec, true
}

// mergeKeys merges two sorted lists without repeats into a new one, a
// key in both once.
func mergeKeys(sorted, added []string) []string {
	out := make([]string, 0, len(sorted)+len(added))
	i, j := 0, 0
	for i < len(sorted) && j < len(added) {
		switch c := strings.Compare(sorted[i], added[j]); {
		case c < 0:
			out = append(out, sorted[i])
			i++
		case c > 0:
			out = append(out, added[j])
			j++
		default:
			out = append(out, sorted[i])
			i, j = i+1, j+1
		}
	}
	out = append(out, sorted[i:]...)
	return append(out, added[j:]...)
}

// lazySort sorts keys in place, calling emit with each key in order as
// soon as it is in its place, and stops when emit returns false: the
// first key comes after O(len(keys)) work, not O(n log n).
func lazySort(keys []string, emit func(string) bool) {
	// ends: the ends of the ranges not yet sorted, nearest last; the
	// range worked on runs from lo to the last end.
	lo := 0
	ends := []int{len(keys)}
	for len(ends) > 0 {
		hi := ends[len(ends)-1]
		if hi-lo <= 16 {
			slices.Sort(keys[lo:hi])
			for ; lo < hi; lo++ {
				if !emit(keys[lo]) {
					return
				}
			}
			ends = ends[:len(ends)-1]
			continue
		}
		// Hoare's partition around the median of three, which also puts
		// a key <= the pivot first and one >= it last, so neither scan
		// runs off the range and both parts are smaller than it.
		m := lo + (hi-lo)/2
		if keys[m] < keys[lo] {
			keys[m], keys[lo] = keys[lo], keys[m]
		}
		if keys[hi-1] < keys[lo] {
			keys[hi-1], keys[lo] = keys[lo], keys[hi-1]
		}
		if keys[hi-1] < keys[m] {
			keys[hi-1], keys[m] = keys[m], keys[hi-1]
		}
		pivot := keys[m]
		i, j := lo, hi-1
		for i <= j {
			for keys[i] < pivot {
				i++
			}
			for keys[j] > pivot {
				j--
			}
			if i <= j {
				keys[i], keys[j] = keys[j], keys[i]
				i++
				j--
			}
		}
		// [lo, j] <= pivot, [i, hi) >= pivot, and what lies between
		// equals it: three ranges, worked on in order.
		ends = append(ends, i, j+1)
	}
}
