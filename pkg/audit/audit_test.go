package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupBench()
	os.Exit(code)
}

// entry makes a realistic entry; i varies its content.
func entry(i int) *Entry {
	return &Entry{
		Actor:  Actor{UID: 1000, PID: int32(4000 + i%100), Agent: "ops", Run: fmt.Sprintf("r-%06d", i%1000)},
		Op:     "state.save",
		Target: fmt.Sprintf("ops:notes/day-%d.md", i),
		Args:   ArgsDigest([]byte(fmt.Sprint(i))),
		Result: "ok",
	}
}

func entries(from, n int) []*Entry {
	es := make([]*Entry, n)
	for i := range es {
		es[i] = entry(from + i)
	}
	return es
}

func open(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// appendSync appends n entries in batches and syncs each batch.
func appendSync(t testing.TB, l *Log, n, batch int) {
	t.Helper()
	for i := 0; i < n; i += batch {
		if err := l.Append(entries(i, min(batch, n-i))); err != nil {
			t.Fatalf("Append: %v", err)
		}
		if err := l.Sync(); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
}

func mustVerify(t testing.TB, dir string) Report {
	t.Helper()
	rep, err := Verify(dir)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !rep.OK {
		t.Fatalf("Verify: not OK: first bad %d: %s", rep.FirstBad, rep.Problem)
	}
	return rep
}

func lastSegment(t testing.TB, dir string) string {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	return filepath.Join(dir, segName(segs[len(segs)-1]))
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	defer l.Close()
	if seq, hash := l.Head(); seq != 0 || hash != string(zeroHex) {
		t.Fatalf("empty head = %d %s", seq, hash)
	}
	in := entries(1, 10)
	in[3].Time = time.Date(2025, 6, 1, 12, 0, 0, 5, time.FixedZone("x", 3600))
	in[4].Result = "ENOENT"
	in[5].Actor = Actor{UID: 0}
	if err := l.Append(in[:4]); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(in[4:]); err != nil {
		t.Fatal(err)
	}
	// Nothing is visible before Sync.
	n := 0
	l.Scan(0, func(*Entry, []byte) error { n++; return nil })
	if n != 0 {
		t.Fatalf("Scan before Sync saw %d entries", n)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	seq, hash := l.Head()
	if seq != 10 || hash != in[9].Hash {
		t.Fatalf("head = %d %s, want 10 %s", seq, hash, in[9].Hash)
	}
	var got []*Entry
	err := l.Scan(0, func(e *Entry, line []byte) error {
		var raw map[string]any
		if err := json.Unmarshal(line, &raw); err != nil {
			t.Errorf("line is not JSON: %v", err)
		}
		if !bytes.HasSuffix(line, []byte(`,"hash":"`+e.Hash+`"}`)) {
			t.Errorf("hash is not the last field: %s", line)
		}
		got = append(got, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("Scan: %d entries", len(got))
	}
	prev := string(zeroHex)
	for i, e := range got {
		w := in[i]
		if e.Type != "audit" || e.Seq != uint64(i+1) || e.Prev != prev || e.Hash != w.Hash || e.Prev != w.Prev {
			t.Errorf("entry %d: %+v, appended %+v", i+1, e, w)
		}
		if !e.Time.Equal(w.Time) || e.Time.Location() != time.UTC || w.Time.Location() != time.UTC {
			t.Errorf("entry %d: time %v, appended %v", i+1, e.Time, w.Time)
		}
		if e.Actor != w.Actor || e.Op != w.Op || e.Target != w.Target || e.Args != w.Args || e.Result != w.Result {
			t.Errorf("entry %d: %+v, appended %+v", i+1, e, w)
		}
		prev = e.Hash
	}
	if !got[3].Time.Equal(time.Date(2025, 6, 1, 11, 0, 0, 5, time.UTC)) {
		t.Errorf("given time not kept: %v", got[3].Time)
	}
	// Scan from the middle, and stop on error.
	var seqs []uint64
	stop := errors.New("stop")
	err = l.Scan(7, func(e *Entry, _ []byte) error {
		seqs = append(seqs, e.Seq)
		if e.Seq == 9 {
			return stop
		}
		return nil
	})
	if err != stop || fmt.Sprint(seqs) != "[7 8 9]" {
		t.Fatalf("Scan(7) = %v, %v", seqs, err)
	}
	rep := mustVerify(t, dir)
	if rep.Entries != 10 || rep.HeadSeq != 10 || rep.HeadHash != hash {
		t.Fatalf("Verify = %+v", rep)
	}
	if rep, err := l.Verify(); err != nil || !rep.OK || rep.HeadSeq != 10 {
		t.Fatalf("online Verify = %+v, %v", rep, err)
	}
}

func TestLineLayout(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	e := &Entry{Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Actor: Actor{UID: 7, PID: 8, Agent: "a", Run: "r"}, Op: "state.save", Target: "a:k", Args: ArgsDigest(nil), Result: "ok"}
	if err := l.Append([]*Entry{e}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, err := os.ReadFile(lastSegment(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"audit","seq":1,"time":"2025-01-02T03:04:05.000000006Z","actor":{"uid":7,"pid":8,"agent":"a","run":"r"},"op":"state.save","target":"a:k","args":"` +
		ArgsDigest(nil) + `","result":"ok","prev":"` + string(zeroHex) + `","hash":"` + e.Hash + "\"}\n"
	if string(b) != want {
		t.Fatalf("line\n%s\nwant\n%s", b, want)
	}
	body := b[:len(b)-1-hashTail]
	sum, _ := hashLine(nil, &[32]byte{}, body)
	if fmt.Sprintf("%x", sum) != e.Hash {
		t.Fatalf("hash is not BLAKE3(prev || body)")
	}
}

func TestStrings(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	defer l.Close()
	odd := []string{"", `"quoted" \back\`, "new\nline\ttab\r\x00\x1f", "caf\xc3\xa9 \xff\xfe bad", "sep\u2028\u2029", "<&>", strings.Repeat("long/", 500)}
	var es []*Entry
	for _, s := range odd {
		es = append(es, &Entry{Op: s, Target: s, Args: s, Result: s, Actor: Actor{Agent: s, Run: s}})
	}
	if err := l.Append(es); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	i := 0
	err := l.Scan(1, func(e *Entry, line []byte) error {
		if !json.Valid(line) || bytes.IndexByte(line, '\n') >= 0 {
			t.Errorf("line %d is not one JSON line: %q", i, line)
		}
		// Each invalid byte comes back as one U+FFFD, as with encoding/json.
		want := string([]rune(odd[i]))
		if e.Op != want || e.Target != want || e.Args != want || e.Result != want || e.Actor.Agent != want || e.Actor.Run != want {
			t.Errorf("string %q came back as %q", odd[i], e.Target)
		}
		i++
		return nil
	})
	if err != nil || i != len(odd) {
		t.Fatalf("Scan: %d, %v", i, err)
	}
	mustVerify(t, dir)
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 4 << 10})
	appendSync(t, l, 500, 7)
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 10 {
		t.Fatalf("only %d segments", len(segs))
	}
	for i, s := range segs {
		st, err := os.Stat(filepath.Join(dir, segName(s)))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o400)
		if i == len(segs)-1 {
			want = 0o600
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", segName(s), st.Mode().Perm(), want)
		}
		if i < len(segs)-1 && st.Size() > 4<<10 {
			t.Errorf("%s: %d bytes, over the segment size", segName(s), st.Size())
		}
	}
	// Scan from the middle of a middle segment.
	var seqs []uint64
	l.Scan(segs[3]+1, func(e *Entry, _ []byte) error { seqs = append(seqs, e.Seq); return nil })
	if uint64(len(seqs)) != 500-segs[3] || seqs[0] != segs[3]+1 {
		t.Fatalf("Scan from %d: %d entries starting %v", segs[3]+1, len(seqs), seqs[:1])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, dir)
	if rep.Entries != 500 {
		t.Fatalf("Verify: %+v", rep)
	}
}

func TestReopenContinues(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10}
	for round := range 4 {
		l := open(t, dir, opts)
		if l.Recovered != "" {
			t.Fatalf("round %d: clean reopen recovered: %s", round, l.Recovered)
		}
		if seq, _ := l.Head(); seq != uint64(round*50) {
			t.Fatalf("round %d: head %d", round, seq)
		}
		appendSync(t, l, 50, 9)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	if rep := mustVerify(t, dir); rep.Entries != 200 {
		t.Fatalf("Verify: %+v", rep)
	}
}

func TestCloseSyncs(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	l.Append(entries(0, 5))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(entries(0, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	l = open(t, dir, Options{})
	defer l.Close()
	if seq, _ := l.Head(); seq != 5 || l.Recovered != "" {
		t.Fatalf("head %d, recovered %q", seq, l.Recovered)
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v", err)
	}
	l.Close()
	open(t, dir, Options{}).Close()
}

func TestTornTailRecovered(t *testing.T) {
	for _, tail := range []string{
		`{"type":"audit","seq":21,"time":"2025-`, // torn: no newline
		"garbage\n",                              // a whole bad line
		"\x00\x00\x00\x00\x00\x00",               // zeros, as after a power loss
	} {
		dir := t.TempDir()
		l := open(t, dir, Options{})
		appendSync(t, l, 20, 3)
		seq, hash := l.Head()
		l.Close()
		seg := lastSegment(t, dir)
		st, _ := os.Stat(seg)
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(tail)
		f.Close()

		l = open(t, dir, Options{})
		if !strings.Contains(l.Recovered, fmt.Sprintf("cut %d bytes", len(tail))) {
			t.Errorf("Recovered = %q", l.Recovered)
		}
		if s, h := l.Head(); s != seq || h != hash {
			t.Errorf("head after recovery %d %s, want %d %s", s, h, seq, hash)
		}
		if st2, _ := os.Stat(seg); st2.Size() != st.Size() {
			t.Errorf("segment is %d bytes after recovery, want %d", st2.Size(), st.Size())
		}
		appendSync(t, l, 5, 5)
		l.Close()
		if rep := mustVerify(t, dir); rep.Entries != 25 {
			t.Errorf("Verify: %+v", rep)
		}
	}
}

// A power loss can leave the head behind the log: the entries past it
// chain on from it, and Open keeps them.
func TestHeadBehind(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 2 << 10})
	appendSync(t, l, 10, 5)
	old, err := os.ReadFile(filepath.Join(dir, headName))
	if err != nil {
		t.Fatal(err)
	}
	appendSync(t, l, 40, 5)
	l.Close()
	if err := os.WriteFile(filepath.Join(dir, headName), old, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, dir)
	if rep.Entries != 50 || !strings.Contains(rep.Note, "behind") || !strings.Contains(rep.Note, "after a crash") {
		t.Fatalf("Verify: %+v", rep)
	}
	l = open(t, dir, Options{})
	if seq, _ := l.Head(); seq != 50 || !strings.Contains(l.Recovered, "40 entries past it (to entry 50)") {
		t.Fatalf("head %d, recovered %q", seq, l.Recovered)
	}
	l.Close()
	if rep := mustVerify(t, dir); rep.Note != "" {
		t.Fatalf("note after Open: %q", rep.Note)
	}
}

// A log a daemon holds open runs ahead of its head between syncs: the
// note says so, not "after a crash" (issue 47).
func TestHeadBehindLive(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 2 << 10})
	defer l.Close()
	appendSync(t, l, 10, 5)
	old, err := os.ReadFile(filepath.Join(dir, headName))
	if err != nil {
		t.Fatal(err)
	}
	appendSync(t, l, 40, 5)
	if err := os.WriteFile(filepath.Join(dir, headName), old, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, dir)
	if !rep.OK || !strings.Contains(rep.Note, "a daemon runs on it") || strings.Contains(rep.Note, "crash") {
		t.Fatalf("Verify of a live log: %+v", rep)
	}
}

func TestTruncationRefused(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	appendSync(t, l, 10, 1)
	l.Close()
	seg := lastSegment(t, dir)
	b, _ := os.ReadFile(seg)
	lines := bytes.SplitAfter(b, []byte("\n"))
	os.Chmod(seg, 0o600)
	if err := os.WriteFile(seg, bytes.Join(lines[:8], nil), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil || rep.OK || rep.FirstBad != 9 || !strings.Contains(rep.Problem, "cut off") {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrTampered) {
		t.Fatalf("Open of a truncated log: %v", err)
	}
}

func TestHeadSlots(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	appendSync(t, l, 10, 2)
	l.Close()
	hpath := filepath.Join(dir, headName)
	b, _ := os.ReadFile(hpath)
	hs, err := parseHead(b)
	if err != nil {
		t.Fatal(err)
	}
	// Tear the newest slot: the other one (one Sync behind) is used.
	torn := bytes.Clone(b)
	copy(torn[hs.best*headSlotSize+10:], "XXXX")
	os.WriteFile(hpath, torn, 0o600)
	rep := mustVerify(t, dir)
	if !strings.Contains(rep.Note, "ignored") || rep.Entries != 10 {
		t.Fatalf("Verify with a torn slot: %+v", rep)
	}
	l = open(t, dir, Options{})
	if seq, _ := l.Head(); seq != 10 || !strings.Contains(l.Recovered, "ignored") {
		t.Fatalf("Open with a torn slot: head %d, recovered %q", seq, l.Recovered)
	}
	l.Close()
	// Both slots bad: refused.
	os.WriteFile(hpath, bytes.Repeat([]byte("x"), 2*headSlotSize), 0o600)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrTampered) {
		t.Fatalf("Open with no valid slot: %v", err)
	}
	if rep, err := Verify(dir); err != nil || rep.OK || rep.Entries != 10 || !strings.Contains(rep.Problem, "no valid slot") {
		t.Fatalf("Verify with no valid slot: %+v %v", rep, err)
	}
	// Missing.
	os.Remove(hpath)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrTampered) {
		t.Fatalf("Open without head: %v", err)
	}
	if rep, err := Verify(dir); err != nil || rep.OK || !strings.Contains(rep.Problem, "missing") {
		t.Fatalf("Verify without head: %+v %v", rep, err)
	}
}

func TestChanged(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	defer l.Close()
	ch := l.Changed()
	l.Append(entries(0, 1))
	select {
	case <-ch:
		t.Fatal("Changed fired before Sync")
	default:
	}
	woke := make(chan uint64)
	go func() {
		<-ch
		seq, _ := l.Head()
		woke <- seq
	}()
	l.Sync()
	select {
	case seq := <-woke:
		if seq != 1 {
			t.Fatalf("woke with head %d", seq)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Changed did not fire")
	}
	ch2 := l.Changed()
	if ch2 == ch {
		t.Fatal("Changed was not replaced")
	}
	l.Sync() // nothing new: no wake-up
	select {
	case <-ch2:
		t.Fatal("Changed fired for an empty Sync")
	default:
	}
}

// A tail follower: take Changed, Scan, wait; it sees every entry once.
func TestTail(t *testing.T) {
	l := open(t, t.TempDir(), Options{SegmentBytes: 4 << 10})
	defer l.Close()
	const total = 300
	got := make(chan []uint64)
	go func() {
		var seqs []uint64
		next := uint64(1)
		for next <= total {
			ch := l.Changed()
			l.Scan(next, func(e *Entry, _ []byte) error {
				seqs = append(seqs, e.Seq)
				next = e.Seq + 1
				return nil
			})
			if next <= total {
				<-ch
			}
		}
		got <- seqs
	}()
	appendSync(t, l, total, 7)
	seqs := <-got
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("tail saw %v...", seqs[:i+1])
		}
	}
}

func TestConcurrent(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 16 << 10})
	var wg sync.WaitGroup
	const writers, per = 8, 60
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i += 3 {
				if err := l.Append(entries(w*1000+i, 3)); err != nil {
					t.Error(err)
					return
				}
				if err := l.Sync(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			seq, _ := l.Head()
			n := uint64(0)
			l.Scan(1, func(e *Entry, _ []byte) error { n++; return nil })
			if n < seq {
				t.Errorf("Scan saw %d entries, head was %d", n, seq)
			}
			if rep, err := l.Verify(); err != nil || !rep.OK {
				t.Errorf("online Verify: %+v %v", rep, err)
			}
		}
	}()
	wg.Wait()
	close(done)
	readers.Wait()
	l.Close()
	if rep := mustVerify(t, dir); rep.Entries != writers*per {
		t.Fatalf("Verify: %+v", rep)
	}
}

func TestExportVerifyFile(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 4 << 10})
	var empty bytes.Buffer
	if err := l.Export(&empty); err != nil {
		t.Fatal(err)
	}
	if rep, err := VerifyFile(&empty); err != nil || !rep.OK || rep.Entries != 0 {
		t.Fatalf("empty export: %+v %v", rep, err)
	}
	appendSync(t, l, 100, 6)
	l.Append(entries(0, 3)) // not synced: not exported
	var buf bytes.Buffer
	if err := l.Export(&buf); err != nil {
		t.Fatal(err)
	}
	l.Close()
	exp := buf.Bytes()
	seq, hash := uint64(100), ""
	if rep, err := VerifyFile(bytes.NewReader(exp)); err != nil || !rep.OK || rep.Entries != seq {
		t.Fatalf("VerifyFile: %+v %v", rep, err)
	} else {
		hash = rep.HeadHash
	}
	lines := bytes.SplitAfter(exp, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty string after the last newline
	if !bytes.Equal(lines[100], appendHeadLine(nil, seq, hash)) {
		t.Fatalf("head line %q", lines[100])
	}
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	changed := bytes.Clone(exp)
	changed[bytes.Index(changed, []byte("day-42"))+4] = '9'
	cases := []struct {
		name     string
		data     []byte
		firstBad uint64
	}{
		{"changed byte", changed, 43}, // entry(42) is seq 43
		{"no head line", join(lines[:100]...), 101},
		{"cut short", join(lines[:60]...), 61},
		{"head line only half", join(append(lines[:100:100], lines[100][:30])...), 101},
		{"entry removed", join(append(lines[:9:9], lines[10:]...)...), 10},
		{"reordered", join(append(append(lines[:19:19], lines[20], lines[19]), lines[21:]...)...), 20},
		{"head line wrong", join(append(lines[:100:100], appendHeadLine(nil, 100, strings.Repeat("ab", 32)))...), 100},
		{"after head", join(append(lines[:101:101], lines[5])...), 101},
		{"no newline at the end", exp[:len(exp)-1], 0},
	}
	for _, c := range cases {
		rep, err := VerifyFile(bytes.NewReader(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.firstBad == 0 {
			if !rep.OK {
				t.Errorf("%s: %+v", c.name, rep)
			}
			continue
		}
		if rep.OK || rep.FirstBad != c.firstBad {
			t.Errorf("%s: OK %v first bad %d (%s), want %d", c.name, rep.OK, rep.FirstBad, rep.Problem, c.firstBad)
		}
	}
}

// Every tampering at any place is found at the right entry, however the
// lines fall into blocks.
func TestVerifyBlockBoundaries(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{SegmentBytes: 64 << 10})
	appendSync(t, l, 1000, 50)
	l.Close()
	defer func(n int) { blockSize = n }(blockSize)
	segs, _ := listSegments(dir)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bs := range []int{512, 3000, 1 << 20} {
		blockSize = bs
		mustVerify(t, dir)
		for range 6 {
			// Change one byte of a random entry's body or hash.
			si := rng.IntN(len(segs))
			path := filepath.Join(dir, segName(segs[si]))
			orig, _ := os.ReadFile(path)
			lines := bytes.SplitAfter(orig, []byte("\n"))
			li := rng.IntN(len(lines) - 1)
			line := lines[li]
			pos := rng.IntN(len(line) - 1)
			mod := bytes.Clone(orig)
			off := len(bytes.Join(lines[:li], nil)) + pos
			mod[off] ^= 0x01
			os.Chmod(path, 0o600)
			os.WriteFile(path, mod, 0o600)
			rep, err := Verify(dir)
			os.WriteFile(path, orig, 0o400)
			want := segs[si] + uint64(li)
			if err != nil || rep.OK || rep.FirstBad != want {
				t.Fatalf("block %d: byte %d of entry %d changed (%q -> %q): %+v %v", bs, pos, want, line[pos], mod[off], rep, err)
			}
		}
	}
}

func TestVerifyErrors(t *testing.T) {
	if _, err := Verify(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("Verify of a missing dir: no error")
	}
	rep, err := Verify(t.TempDir())
	if err != nil || !rep.OK {
		t.Fatalf("Verify of an empty dir: %+v %v", rep, err)
	}
}

func TestTimeRange(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	defer l.Close()
	if err := l.Append([]*Entry{{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}); err == nil {
		t.Fatal("year 10000 accepted")
	}
	if seq, _ := l.Head(); seq != 0 {
		t.Fatal("a refused batch moved the head")
	}
}

func FuzzVerifyFile(f *testing.F) {
	dir := f.TempDir()
	l := open(f, dir, Options{})
	appendSync(f, l, 3, 3)
	var buf bytes.Buffer
	l.Export(&buf)
	l.Close()
	f.Add(buf.Bytes())
	f.Add([]byte(linePrefix + "1,\n"))
	f.Add([]byte(headLinePrefix + "0,\"hash\":\"" + string(zeroHex) + "\"}"))
	f.Add([]byte(linePrefix + strings.Repeat("9", 300)))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := VerifyFile(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK && !bytes.HasSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte(`"}`)) {
			t.Fatalf("OK for %q", data)
		}
	})
}

func TestOpenChecksHeadEntry(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	appendSync(t, l, 5, 5)
	big := entry(99)
	big.Target = strings.Repeat("t", 20<<10) // longer than Open's first read back
	l.Append([]*Entry{big})
	l.Close()
	l = open(t, dir, Options{})
	if l.Recovered != "" {
		t.Fatalf("Recovered = %q", l.Recovered)
	}
	l.Close()
	seg := lastSegment(t, dir)
	b, _ := os.ReadFile(seg)
	b[len(b)-200] = 'T' // inside the last entry's body
	os.WriteFile(seg, b, 0o600)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrTampered) {
		t.Fatalf("Open with the head entry changed: %v", err)
	}
	if rep, _ := Verify(dir); rep.OK || rep.FirstBad != 6 {
		t.Fatalf("Verify: %+v", rep)
	}
}

func TestLineTooLong(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	defer l.Close()
	e := entry(1)
	e.Target = strings.Repeat("x", MaxLineBytes)
	if err := l.Append([]*Entry{entry(0), e}); err == nil {
		t.Fatal("an entry over MaxLineBytes was accepted")
	}
	if seq, _ := l.Head(); seq != 0 {
		t.Fatal("a refused batch moved the head")
	}
	appendSync(t, l, 2, 2)
	if seq, _ := l.Head(); seq != 2 {
		t.Fatalf("head %d after a refused batch and 2 entries", seq)
	}
	rep, err := VerifyFile(bytes.NewReader(bytes.Repeat([]byte("a"), 3*blockSize)))
	if err != nil || rep.OK || !strings.Contains(rep.Problem, "longer than") {
		t.Fatalf("VerifyFile of one huge line: %+v %v", rep, err)
	}
}

// Publish makes appended entries visible to Scan and wakes Changed before
// any Sync; Head still names only the durable entries.
func TestPublishBeforeSync(t *testing.T) {
	l, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := l.Changed()
	if err := l.Append([]*Entry{{Op: "a"}, {Op: "b"}, {Op: "c"}}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		if err := l.Scan(1, func(*Entry, []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("Scan saw %d unsynced, unpublished entries", n)
	}
	l.Publish(2)
	select {
	case <-ch:
	default:
		t.Fatal("Publish did not close Changed")
	}
	if n := count(); n != 2 {
		t.Fatalf("Scan after Publish(2) saw %d entries", n)
	}
	if seq, _ := l.Head(); seq != 0 {
		t.Fatalf("Head is %d before any Sync", seq)
	}
	l.Publish(99) // beyond what was appended: cut to 3
	if got := l.Published(); got != 3 {
		t.Fatalf("Published = %d after Publish(99) of 3 entries", got)
	}
	ch = l.Changed()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("Sync of already published entries closed Changed again")
	default:
	}
	if seq, _ := l.Head(); seq != 3 {
		t.Fatalf("Head is %d after Sync", seq)
	}
}
