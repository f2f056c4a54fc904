package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// damagedJournal makes a data dir whose journal holds 120 saves, one
// batch each, and no work tree (only the journal knows them), and
// returns it with the offset of each batch.
func damagedJournal(t *testing.T) (string, []int64) {
	t.Helper()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	var offs []int64
	for i := range 120 {
		offs = append(offs, s.j.pos)
		commit(t, s, save("a", fmt.Sprintf("k%03d", i), strings.Repeat("v", 100+i)))
	}
	s.Flush()
	crashed := t.TempDir()
	copyTree(t, dir, crashed)
	s.Close()
	os.RemoveAll(filepath.Join(crashed, "repo"))
	return crashed, offs
}

func writeAt(t *testing.T, dir string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "journal", "wal"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// wantKeys checks that agent a has exactly the keys k000..k119 less
// those in lost, with their values.
func wantKeys(t *testing.T, s *Store, lost map[int]bool) {
	t.Helper()
	want := map[string]string{}
	for i := range 120 {
		if !lost[i] {
			want[fmt.Sprintf("k%03d", i)] = strings.Repeat("v", 100+i)
		}
	}
	wantValues(t, s, "a", want)
}

// TestJournalDamageRefused: damage in the middle of the journal (a byte
// flipped in one record, a zeroed block over several), with intact
// batches after it, is never taken for a torn tail: Open refuses, naming
// where and what can be salvaged; with Recover it keeps every intact
// record, says what it lost, and the next start is a normal one.
func TestJournalDamageRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string, offs []int64) (int64, map[int]bool)
	}{
		{"flipped byte", func(t *testing.T, dir string, offs []int64) (int64, map[int]bool) {
			writeAt(t, dir, []byte{0xff}, offs[60]+60)
			return offs[60], map[int]bool{60: true}
		}},
		{"zeroed block", func(t *testing.T, dir string, offs []int64) (int64, map[int]bool) {
			at := (offs[40] + 4095) / 4096 * 4096
			writeAt(t, dir, make([]byte, 4096), at)
			lost := map[int]bool{}
			first := int64(-1)
			for i, o := range offs {
				end := int64(1 << 40)
				if i+1 < len(offs) {
					end = offs[i+1]
				}
				if end > at && o < at+4096 {
					lost[i] = true
					if first < 0 {
						first = o
					}
				}
			}
			if first < at {
				first = at // the record cut at the block's start is bad from there
			}
			return first, lost
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, offs := damagedJournal(t)
			at, lost := c.damage(t, dir, offs)
			_, err := Open(dir, Options{})
			var de *DamageError
			if !errors.As(err, &de) || !errors.Is(err, ErrJournalDamaged) {
				t.Fatalf("opened a journal damaged in the middle: %v", err)
			}
			if len(de.Damage) != 1 || de.Records != 120-len(lost)-firstLost(lost) {
				t.Errorf("damage %+v, %d records salvageable; want 1 span, %d", de.Damage, de.Records, 120-len(lost)-firstLost(lost))
			}
			if !strings.Contains(err.Error(), fmt.Sprint("bytes ", de.Damage[0].Offset)) || !strings.Contains(err.Error(), "salvaged") {
				t.Errorf("the refusal does not say where and what: %v", err)
			}
			if c.name == "flipped byte" && de.Damage[0].Offset != at {
				t.Errorf("damage at %d, want %d", de.Damage[0].Offset, at)
			}
			// Refused again: the refusal changed nothing.
			if _, err := Open(dir, Options{}); !errors.As(err, &de) {
				t.Fatalf("a second start: %v", err)
			}
			s, err := Open(dir, Options{Recover: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Lost(); len(got) != 1 || got[0].Offset > at+4096 || got[0].Offset < offs[firstLost(lost)] {
				t.Errorf("Lost = %+v", got)
			}
			wantKeys(t, s, lost)
			s.Close()
			s = mustOpen(t, dir)
			defer s.Close()
			if len(s.Lost()) != 0 {
				t.Errorf("a start after the salvage lost %+v", s.Lost())
			}
			wantKeys(t, s, lost)
		})
	}
}

// firstLost is the first index in lost.
func firstLost(lost map[int]bool) int {
	for i := range 120 {
		if lost[i] {
			return i
		}
	}
	return 120
}

// TestJournalTornLastBatch: a bad record in the last batch, with nothing
// after it, is a torn write: the journal ends before it, and the store
// opens with every batch before.
func TestJournalTornLastBatch(t *testing.T) {
	dir, offs := damagedJournal(t)
	writeAt(t, dir, []byte{0xff}, offs[119]+40)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Lost()) != 0 {
		t.Errorf("a torn tail counted as damage: %+v", s.Lost())
	}
	wantKeys(t, s, map[int]bool{119: true})
}

// TestSalvageIgnoresRecordsInValues: a value that holds a record of the
// journal's shape (the generation right, its CRC plain) is not taken for
// one by a salvage's search for intact records: the records' CRCs are
// seeded with a salt only the daemon reads.
func TestSalvageIgnoresRecordsInValues(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	for i := range 10 {
		commit(t, s, save("a", fmt.Sprintf("k%03d", i), "v"))
	}
	forged := &journal{gen: s.j.gen}
	forged.appendRecord(&record{kind: recSave, ver: 1 << 40, agent: "victim", key: "injected", value: []byte("forged")}, true)
	evil := s.j.pos
	commit(t, s, save("a", "evil", string(forged.buf)))
	commit(t, s, save("a", "after", "v"))
	s.Flush()
	crashed := t.TempDir()
	copyTree(t, dir, crashed)
	s.Close()
	os.RemoveAll(filepath.Join(crashed, "repo"))
	// The damage is in the forged value's own record, before the value:
	// the search for intact records goes through the value.
	writeAt(t, crashed, []byte{0xff}, evil+20)
	s, err := Open(crashed, Options{Recover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, _, err := s.Load("victim", "injected"); err == nil {
		t.Fatalf("a record forged in a value was replayed: %q", v)
	}
	if v, _, err := s.Load("a", "after"); err != nil || string(v) != "v" {
		t.Errorf("the save after the forged value: %q %v", v, err)
	}
	if _, _, err := s.Load("a", "evil"); err == nil {
		t.Error("the damaged save came back")
	}
	if v, _, err := s.Load("a", "k005"); err != nil || string(v) != "v" {
		t.Errorf("a save before the damage: %q %v", v, err)
	}
}
