package memindex

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/recall"
)

func testMemories(n int) []*memory.Memory {
	at := time.Unix(1700000000, 0).UTC()
	var out []*memory.Memory
	for i := 0; i < n; i++ {
		m := &memory.Memory{Kind: memory.Kinds[i%len(memory.Kinds)], Created: at.Add(time.Duration(i) * time.Second),
			Importance: float64(i%4) / 4, Text: fmt.Sprintf("note %d on disks and %d certificates", i, i%9)}
		m.ID = memory.NewID(m.Created)
		switch i % 3 {
		case 1:
			m.Tags = []string{"ops"}
		case 2:
			m.Tags = []string{"db", "ops", fmt.Sprint("t", i%5)}
		}
		if i%4 == 0 {
			m.Expires = m.Created.Add(time.Hour)
		}
		out = append(out, m)
	}
	return out
}

// index holds an index as the kernel does.
type index struct{ ix *recall.Index }

func testIndex(t *testing.T, mems []*memory.Memory) *index {
	m := &index{ix: recall.New(recall.DefaultParams)}
	var preps []*recall.Prepared
	for i, mm := range mems {
		p := recall.Prepare(DocOf(mm, 100+i, nil))
		preps = append(preps, &p)
	}
	if err := m.ix.AddPrepared(preps); err != nil {
		t.Fatal(err)
	}
	return m
}

// metas lists what the kernel knows of each memory of m.
func metas(t *testing.T, m *index) []string {
	var out []string
	m.ix.Each(func(in recall.Info) bool {
		mt, ok := MetaOf(in)
		if !ok {
			t.Fatalf("memory %s: damaged metadata", in.ID)
		}
		out = append(out, fmt.Sprintf("%s %+v %q", in.ID, mt, mt.Tags()))
		return true
	})
	sort.Strings(out)
	return out
}

func TestMemMetaRoundTrip(t *testing.T) {
	mems := testMemories(200)
	m := testIndex(t, mems)
	for i, mm := range mems {
		in, ok := m.ix.Lookup(mm.ID)
		if !ok {
			t.Fatalf("memory %d not indexed", i)
		}
		mt, ok := MetaOf(in)
		var exp int64
		if !mm.Expires.IsZero() {
			exp = mm.Expires.UnixNano()
		}
		if !ok || memory.Kinds[mt.Kind] != mm.Kind || mt.Created != mm.Created.UnixNano() || mt.Expires != exp ||
			mt.Size != uint32(100+i) || mt.Importance != float32(mm.Importance) || !slices.Equal(mt.Tags(), mm.Tags) {
			t.Fatalf("memory %d: meta %+v %v, from %+v", i, mt, ok, mm)
		}
		for _, tag := range []string{"ops", "db", "t2", "none"} {
			if mt.HasTag(tag) != slices.Contains(mm.Tags, tag) {
				t.Fatalf("memory %d: hasTag(%s) wrong", i, tag)
			}
		}
	}
	f, err := NewFilter(memory.Semantic, []string{"db", "ops"}, mems[10].Created, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	m.ix.Each(func(in recall.Info) bool {
		mt, _ := MetaOf(in)
		want := memory.Kinds[mt.Kind] == memory.Semantic && mt.ntags == 3 && mt.Created >= mems[10].Created.UnixNano()
		if f.MatchInfo(in) != want {
			t.Fatalf("filter of %s: want %v", in.ID, want)
		}
		if want {
			n++
		}
		return true
	})
	if n == 0 {
		t.Fatal("the filter matched nothing")
	}
}

// encodeIndex is m's file as Write writes it.
func encodeIndex(t *testing.T, m *index, seq uint64) ([]byte, error) {
	f, err := os.Create(filepath.Join(t.TempDir(), "ix"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Write(f, m.ix, seq); err != nil {
		return nil, err
	}
	return os.ReadFile(f.Name())
}

func TestMemIndexFile(t *testing.T) {
	mems := testMemories(500)
	m := testIndex(t, mems)
	for _, mm := range mems[:100] {
		m.ix.Delete(mm.ID)
	}
	b, err := encodeIndex(t, m, 42)
	if err != nil {
		t.Fatal(err)
	}
	gotIx, seq, err := Decode(b)
	got := &index{ix: gotIx}
	if err != nil || seq != 42 {
		t.Fatalf("decode: seq %d err %v", seq, err)
	}
	if a, b := metas(t, m), metas(t, got); !slices.Equal(a, b) || len(a) != 400 {
		t.Fatalf("decoded %d memories, want the %d saved", len(b), len(a))
	}

	old := append([]byte(nil), b...)
	copy(old, "OXMEMIX1")
	if _, _, err := Decode(old); !errors.Is(err, ErrBad) {
		t.Fatalf("old version: err %v", err)
	}
	for _, bad := range [][]byte{nil, b[:len(b)/2], b[:len(b)-1]} {
		if _, _, err := Decode(bad); err == nil {
			t.Fatalf("%d bytes of %d decoded", len(bad), len(b))
		}
	}
	flipped := append([]byte(nil), b...)
	flipped[len(flipped)/2] ^= 1
	if _, _, err := Decode(flipped); err == nil {
		t.Fatal("a flipped bit decoded")
	}

	// A damaged aux, under valid checksums, is refused too.
	m.ix.Add(recall.Doc{ID: memory.NewID(time.Now()), Text: "x", Aux: "\xff"})
	b, err = encodeIndex(t, m, 43)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Decode(b); !errors.Is(err, ErrBad) {
		t.Fatalf("damaged aux: err %v", err)
	}
}
