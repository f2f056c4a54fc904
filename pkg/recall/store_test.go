package recall

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// checkIndex checks that the posting lists, the forward index, the id
// table and the counters of ix agree.
func checkIndex(t *testing.T, ix *Index) {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	want := make([]map[uint32]uint16, len(ix.post))
	live, records, garbage, total := 0, 0, 0, int64(0)
	for n := range ix.docs {
		r := len(ix.record(uint32(n)))
		records += r
		if ix.docs[n].idLen == 0 {
			garbage += r
			continue
		}
		live++
		total += int64(ix.docLen[n])
		id := ix.docID(uint32(n))
		if got, ok := ix.ids.find(ix, id); !ok || got != uint32(n) {
			t.Fatalf("id %q: table has %d %v, want %d", id, got, ok, n)
		}
		tfs, ok := appendTerms(nil, ix.termBytes(uint32(n)), uint32(len(ix.termStr)))
		if !ok {
			t.Fatalf("document %q: bad terms", id)
		}
		sum := 0
		for _, tf := range tfs {
			if want[tf.term] == nil {
				want[tf.term] = map[uint32]uint16{}
			}
			want[tf.term][uint32(n)] = tf.tf
			sum += int(tf.tf)
		}
		if sum != int(ix.docLen[n]) {
			t.Fatalf("document %q: tfs sum to %d, length %d", id, sum, ix.docLen[n])
		}
	}
	if live != ix.live || ix.ids.n != live || total != ix.totalLen || records != ix.records || garbage != ix.garbage {
		t.Fatalf("live %d/%d/%d, length %d/%d, records %d/%d, garbage %d/%d", live, ix.live, ix.ids.n, total, ix.totalLen, records, ix.records, garbage, ix.garbage)
	}
	for term, p := range ix.post {
		if len(p.docs) != len(want[term]) || len(p.tfs) != len(p.docs) {
			t.Fatalf("term %q: %d postings, want %d", ix.termStr[term], len(p.docs), len(want[term]))
		}
		for i, n := range p.docs {
			if i > 0 && p.docs[i-1] >= n || want[term][n] != p.tfs[i] {
				t.Fatalf("term %q: posting %d (doc %d tf %d) is out of order or wrong", ix.termStr[term], i, n, p.tfs[i])
			}
		}
	}
}

// infos lists the documents of ix by ID.
func infos(ix *Index) []string {
	var out []string
	ix.Each(func(in Info) bool {
		out = append(out, fmt.Sprintf("%s %v %v %q", in.ID, in.Time.UnixNano(), in.Importance, in.Aux))
		return true
	})
	sort.Strings(out)
	return out
}

// TestStoreRoundTrip deletes and re-adds documents (through compactions),
// saves and loads the index, and checks that the live, the loaded and a
// fresh build of the same documents agree: structure, documents, ranking.
func TestStoreRoundTrip(t *testing.T) {
	docs, words := synthCorpus(4000, 600, 9)
	at := time.Unix(1700000000, 0)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range docs {
		docs[i].ID = fmt.Sprintf("m%05d", i)
		docs[i].Time = at.Add(time.Duration(i) * time.Millisecond)
		docs[i].Importance = float32(i%5) / 4
		docs[i].Aux = fmt.Sprint("aux", i%7, string(rune('a'+i%26)))
		if i%50 == 0 {
			docs[i].Vector = []float32{float32(i % 3), 1, 0.5}
		}
	}
	live := New(DefaultParams)
	current := map[string]Doc{}
	var order []string // insertion order of the live documents
	add := func(d Doc) {
		if err := live.Add(d); err != nil {
			t.Fatal(err)
		}
		if _, ok := current[d.ID]; ok {
			for i, id := range order {
				if id == d.ID {
					order = append(order[:i], order[i+1:]...)
					break
				}
			}
		}
		current[d.ID] = d
		order = append(order, d.ID)
	}
	for _, d := range docs {
		add(d)
	}
	compactions := 0
	for round := 0; round < 3; round++ {
		for i := range docs {
			if rng.IntN(3) == 0 {
				before := len(live.chunks)
				live.Delete(docs[i].ID)
				if _, ok := current[docs[i].ID]; ok {
					delete(current, docs[i].ID)
					for j, id := range order {
						if id == docs[i].ID {
							order = append(order[:j], order[j+1:]...)
							break
						}
					}
				}
				if live.garbage == 0 && before > 0 {
					compactions++
				}
			}
		}
		for range docs {
			if rng.IntN(4) == 0 {
				d := docs[rng.IntN(len(docs))]
				d.Text = words[rng.IntN(len(words))] + " " + d.Text
				d.Aux += "!"
				add(d) // a replacement, or a re-add of a deleted one
			}
		}
		checkIndex(t, live)
	}
	if compactions == 0 {
		t.Fatal("no compaction ran")
	}
	var buf bytes.Buffer
	if err := live.Save(&buf); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	fresh := New(DefaultParams)
	for _, id := range order {
		if err := fresh.Add(current[id]); err != nil {
			t.Fatal(err)
		}
	}
	checkIndex(t, loaded)
	checkIndex(t, fresh)
	// Adds after a load go to new chunks, after the loaded one.
	extra := Doc{ID: "extra", Text: words[1] + " " + words[2], Aux: "x"}
	for _, ix := range []*Index{live, loaded, fresh} {
		if err := ix.Add(extra); err != nil {
			t.Fatal(err)
		}
		checkIndex(t, ix)
	}
	want := infos(fresh)
	for name, ix := range map[string]*Index{"live": live, "loaded": loaded} {
		if got := infos(ix); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: documents differ from a fresh build", name)
		}
		for _, id := range order {
			in, ok := ix.Lookup(id)
			if !ok || in.Aux != current[id].Aux || in.ID != id {
				t.Fatalf("%s: lookup %s: %+v %v", name, id, in, ok)
			}
		}
	}
	for i := 0; i < 100; i++ {
		q := words[i%len(words)] + " " + words[(i*7+3)%len(words)] + " " + words[(i*13+5)%40]
		for _, opt := range []Options{{K: 20}, {K: 10, BM25Only: true}, {K: 10, QueryVector: []float32{1, 0, 1}}} {
			a, _ := fresh.Search(q, opt)
			for name, ix := range map[string]*Index{"live": live, "loaded": loaded} {
				b, _ := ix.Search(q, opt)
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("%s %q: hits %v\nfresh build %v", name, q, b, a)
				}
			}
		}
	}
}

// TestIDTable checks the id table against a map through many adds and
// deletes, with ids that share prefixes and lengths.
func TestIDTable(t *testing.T) {
	ix := New(DefaultParams)
	model := map[string]bool{}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 30000; i++ {
		id := fmt.Sprint("id", rng.IntN(3000))
		switch rng.IntN(3) {
		case 0, 1:
			if err := ix.Add(Doc{ID: id, Text: "word"}); err != nil {
				t.Fatal(err)
			}
			model[id] = true
		default:
			if ix.Delete(id) != model[id] {
				t.Fatalf("delete %s: want %v", id, model[id])
			}
			delete(model, id)
		}
		if probe := fmt.Sprint("id", rng.IntN(3000)); ix.Has(probe) != model[probe] {
			t.Fatalf("step %d: has %s, want %v", i, probe, model[probe])
		}
	}
	if ix.Len() != len(model) {
		t.Fatalf("%d documents, want %d", ix.Len(), len(model))
	}
	checkIndex(t, ix)
}

func TestAddTooLong(t *testing.T) {
	ix := New(DefaultParams)
	long := string(make([]byte, maxIDLen+1))
	if err := ix.Add(Doc{ID: long, Text: "x"}); !errors.Is(err, ErrTooLong) {
		t.Fatalf("long id: err %v", err)
	}
	if err := ix.Add(Doc{ID: "a", Aux: long, Text: "x"}); !errors.Is(err, ErrTooLong) {
		t.Fatalf("long aux: err %v", err)
	}
}

// resum recomputes the checksum of a changed index file.
func resum(b []byte) []byte {
	body := b[:len(b)-4]
	return binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, crcTable))
}

// TestLoadRejects: a damaged file, or one of another version, is refused,
// even with a valid checksum.
func TestLoadRejects(t *testing.T) {
	docs, _ := synthCorpus(300, 100, 3)
	ix, err := Rebuild(DefaultParams, docs)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ix.Save(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	v1 := bytes.Clone(data)
	binary.LittleEndian.PutUint32(v1[len(fileMagic):], 1)
	if _, err := LoadBytes(resum(v1)); !errors.Is(err, ErrVersion) {
		t.Errorf("version 1: err %v, want ErrVersion", err)
	}
	// Every byte changed in turn (checksum fixed) must be refused or give
	// an index that passes the checks; none may panic.
	refused := 0
	for i := len(fileMagic) + 4; i < len(data)-4; i += 7 {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		got, err := LoadBytes(resum(bad))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d changed: err %v, want ErrCorrupt", i, err)
			}
			refused++
			continue
		}
		got.Search("wbq wcq", Options{})
	}
	if refused == 0 {
		t.Fatal("no damaged file was refused")
	}
	two, err := Rebuild(DefaultParams, []Doc{{ID: "dupA", Text: "one"}, {ID: "dupB", Text: "two"}})
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := two.Save(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBytes(resum(bytes.Replace(buf.Bytes(), []byte("dupB"), []byte("dupA"), 1))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("duplicate id: err %v, want ErrCorrupt", err)
	}
	tail := append(bytes.Clone(data[:len(data)-4]), 0)
	if _, err := LoadBytes(resum(append(tail, 0, 0, 0, 0))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing byte: err %v, want ErrCorrupt", err)
	}
}
