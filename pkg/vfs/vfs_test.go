package vfs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

// The layer's semantics, in-process: a real kernel opened in a temporary
// folder, no FUSE, no daemon, no root needed.

// TestMain lets the test binary be the init of the sandboxes of the runs
// the tests start, as in pkg/kernel.
func TestMain(m *testing.M) {
	sandbox.Main()
	code := m.Run()
	if closeShared != nil {
		closeShared()
	}
	os.Exit(code)
}

// closeShared closes the kernel the tests of state files share.
var closeShared func()

type world struct {
	k *kernel.Kernel
	l *Layer
	c *kernel.Cred
}

func open(t *testing.T) *world {
	t.Helper()
	w := openIn(t, t.TempDir())
	t.Cleanup(func() { w.k.Close() })
	return w
}

// openIn opens a kernel whose data is in data; the caller closes it.
func openIn(t *testing.T, data string) *world {
	t.Helper()
	cfg := config.Default()
	cfg.Data = data
	cfg.Socket = filepath.Join(data, "none.sock")
	cfg.NoMount = true
	k, err := kernel.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := k.Identify(uint32(os.Getuid()), uint32(os.Getgid()), int32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	return &world{k: k, l: New(k), c: c}
}

func code(err error) string {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	if errors.Is(err, syscall.EBADF) {
		return "EBADF"
	}
	return ""
}

// readAll reads h to its end, as cat does.
func readAll(t *testing.T, h *Handle) string {
	t.Helper()
	var out []byte
	buf := make([]byte, 7) // small, so reads resume at offsets
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		n, err := h.Read(ctx, buf, int64(len(out)))
		if err != nil {
			t.Fatalf("read at %d: %v", len(out), err)
		}
		if n == 0 {
			return string(out)
		}
		out = append(out, buf[:n]...)
	}
}

// spawn starts a run through the spawn file and returns its id, read
// back on the same open file.
func (w *world) spawn(t *testing.T, agent, line string) string {
	t.Helper()
	ctx := context.Background()
	h, err := w.l.Open(ctx, w.c, w.l.Spawn(agent), syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if n, err := h.Write(ctx, []byte(line)); err != nil || n != len(line) {
		t.Fatalf("write %q to spawn: %d %v", line, n, err)
	}
	id := strings.TrimSuffix(readAll(t, h), "\n")
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("spawn answered %q", id)
	}
	return id
}

func (w *world) file(t *testing.T, agent, run, name string) *Node {
	t.Helper()
	ctx := context.Background()
	e, err := w.l.Runs(agent).Lookup(ctx, w.c, run)
	if err != nil {
		t.Fatalf("lookup run %s: %v", run, err)
	}
	f, err := e.Dir.Lookup(ctx, w.c, name)
	if err != nil {
		t.Fatalf("lookup %s/%s: %v", run, name, err)
	}
	return f.File
}

func (w *world) status(t *testing.T, agent, run string) proto.RunRecord {
	t.Helper()
	h, err := w.l.Open(context.Background(), w.c, w.file(t, agent, run, "status"), syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	var rec proto.RunRecord
	if err := json.Unmarshal([]byte(readAll(t, h)), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func (w *world) ctl(t *testing.T, agent, run, cmd string) error {
	t.Helper()
	ctx := context.Background()
	h, err := w.l.Open(ctx, w.c, w.file(t, agent, run, "ctl"), syscall.O_WRONLY|syscall.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	_, err = h.Write(ctx, []byte(cmd))
	return err
}

// TestRunFiles: a run started by writing its command line to spawn is
// listed, its out is followed (a read waits for the next record, and is
// end of file once the run has ended), and its status is its record.
func TestRunFiles(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	id := w.spawn(t, "ops", `sh -c 'echo "one two"; sleep 0.3; echo three'`+"\n")

	es, err := w.l.Runs("ops").Entries(ctx, w.c)
	if err != nil || len(es) != 1 || es[0].Name != id || es[0].Dir == nil {
		t.Fatalf("runs/: %+v %v", es, err)
	}
	files, _ := es[0].Dir.Entries(ctx, w.c)
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "ctl out status stdin" {
		t.Fatalf("runs/%s/: %q", id, names)
	}

	out := w.file(t, "ops", id, "out")
	// Two readers at once, each from its own open: both get every record.
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i := range got {
		h, err := w.l.Open(ctx, w.c, out, syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer h.Release()
			got[i] = readAll(t, h)
		}()
	}
	wg.Wait()
	if got[0] != got[1] {
		t.Fatalf("two readers of out differ:\n%s\n%s", got[0], got[1])
	}
	lines := strings.Split(strings.TrimSuffix(got[0], "\n"), "\n")
	var texts []string
	for _, l := range lines {
		var r struct {
			Type, Text string
			Status     *int
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("out line %q: %v", l, err)
		}
		if r.Type == "output" {
			texts = append(texts, r.Text)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"type":"exit"`) {
		t.Fatalf("out does not end with the exit record: %s", got[0])
	}
	if !reflect.DeepEqual(texts, []string{"one two", "three"}) {
		t.Fatalf("out texts %q:\n%s", texts, got[0])
	}
	rec := w.status(t, "ops", id)
	if rec.ID != id || rec.State != proto.RunExited || rec.Status == nil || *rec.Status != 0 {
		t.Fatalf("status: %+v", rec)
	}
	// stat of the open out shows what has come so far.
	h, _ := w.l.Open(ctx, w.c, out, syscall.O_RDONLY)
	readAll(t, h)
	if a, _ := w.l.Stat(ctx, w.c, Entry{File: out}, h); a.Size != int64(len(got[0])) || a.Mode != 0o444 {
		t.Fatalf("fstat of out: %+v, want size %d", a, len(got[0]))
	}
	h.Release()
}

// TestRunCtl: stop, cont and kill written to ctl signal the run.
func TestRunCtl(t *testing.T) {
	w := open(t)
	id := w.spawn(t, "ops", "sleep 30")
	waitState := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if rec := w.status(t, "ops", id); rec.State == want {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("state %s, want %s", rec.State, want)
			}
		}
	}
	waitState(proto.RunRunning)
	if err := w.ctl(t, "ops", id, "stop\n"); err != nil {
		t.Fatal(err)
	}
	waitState(proto.RunStopped)
	if err := w.ctl(t, "ops", id, "cont"); err != nil {
		t.Fatal(err)
	}
	waitState(proto.RunRunning)
	if err := w.ctl(t, "ops", id, "bogus\n"); code(err) != proto.EINVAL {
		t.Fatalf("ctl bogus: %v, want EINVAL", err)
	}
	if err := w.ctl(t, "ops", id, "kill\n"); err != nil {
		t.Fatal(err)
	}
	waitState(proto.RunExited)
	if rec := w.status(t, "ops", id); rec.Status == nil || *rec.Status != 128+9 {
		t.Fatalf("status after kill: %+v", rec)
	}
	// An ended run: a signal is refused.
	if err := w.ctl(t, "ops", id, "kill\n"); err == nil {
		t.Fatal("kill of an ended run: no error")
	}
}

// TestRefusals: what the table refuses, and how.
func TestRefusals(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	id := w.spawn(t, "ops", "true")
	var audited []string
	status := w.file(t, "ops", id, "status")
	refusing := *status.Kind
	refusing.Refused = func(k Kernel, c *kernel.Cred, n *Node) { audited = append(audited, n.Kind.Name) }
	for _, tc := range []struct {
		n     *Node
		flags int
		want  string
	}{
		{status, syscall.O_WRONLY, proto.EROFS},
		{status, syscall.O_RDONLY | syscall.O_TRUNC, proto.EROFS},
		{w.file(t, "ops", id, "out"), syscall.O_RDWR, proto.EROFS},
		{w.file(t, "ops", id, "ctl"), syscall.O_RDONLY, proto.EACCES},
		{&Node{Kind: &refusing, Agent: "ops", ID: id}, syscall.O_WRONLY, proto.EROFS},
	} {
		if _, err := w.l.Open(ctx, w.c, tc.n, tc.flags); code(err) != tc.want {
			t.Errorf("open %s with %#o: %v, want %s", tc.n.Kind.Name, tc.flags, err, tc.want)
		}
	}
	if !reflect.DeepEqual(audited, []string{"status"}) {
		t.Errorf("Refused heard of %q", audited)
	}
	// A handle does only what it was opened for.
	h, _ := w.l.Open(ctx, w.c, w.l.Spawn("ops"), syscall.O_WRONLY)
	if _, err := h.Read(ctx, make([]byte, 8), 0); code(err) != "EBADF" {
		t.Errorf("read of spawn opened write-only: %v", err)
	}
	for _, line := range []string{"", "\n", "sh -c 'unclosed"} {
		if _, err := h.Write(ctx, []byte(line)); code(err) != proto.EINVAL {
			t.Errorf("spawn %q: %v, want EINVAL", line, err)
		}
	}
	if _, err := w.l.Runs("ops").Lookup(ctx, w.c, "r-none"); code(err) != proto.ENOENT {
		t.Errorf("lookup of no run: %v", err)
	}
	if _, err := w.l.Runs("ops").Lookup(ctx, w.c, id); err != nil {
		t.Errorf("lookup of the run: %v", err)
	}
	if _, err := w.l.Runs("other").Lookup(ctx, w.c, id); code(err) != proto.ENOENT {
		t.Errorf("lookup of ops's run under another agent: %v", err)
	}
	run, _ := w.l.Runs("ops").Lookup(ctx, w.c, id)
	if _, err := run.Dir.Lookup(ctx, w.c, "nothing"); code(err) != proto.ENOENT {
		t.Errorf("lookup of a file no row has: %v", err)
	}
}

// TestFollowRelease: releasing an out whose run goes on ends its
// attach, and an interrupted read returns at once.
func TestFollowRelease(t *testing.T) {
	w := open(t)
	id := w.spawn(t, "ops", "sleep 30")
	h, err := w.l.Open(context.Background(), w.c, w.file(t, "ops", id, "out"), syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	buf := make([]byte, 1<<16)
	off := int64(0)
	for {
		n, err := h.Read(ctx, buf, off)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("interrupted read: %v", err)
			}
			break
		}
		if n == 0 {
			t.Fatal("end of file while the run goes on")
		}
		off += int64(n)
	}
	h.Release()
	h.mu.Lock()
	wake := h.wake
	h.mu.Unlock()
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not end at release")
	}
	w.ctl(t, "ops", id, "kill")
}

func TestWords(t *testing.T) {
	for in, want := range map[string][]string{
		"make test\n":                     {"make", "test"},
		`sh -c "make test"`:               {"sh", "-c", "make test"},
		`echo 'a "b"' "c \"d\" \$e" f\ g`: {"echo", `a "b"`, `c "d" $e`, "f g"},
		`printf '' x`:                     {"printf", "", "x"},
		"  \t\n":                          nil,
	} {
		got, err := Words(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Words(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`'a`, `"a`, "\xff"} {
		if _, err := Words(in); code(err) != proto.EINVAL {
			t.Errorf("Words(%q): %v, want EINVAL", in, err)
		}
	}
}

// TestGenerated: the files made at each open read what their syscall
// answers now, stat shows that size, and a write to the policy is
// refused and audited (policy.set, EROFS).
func TestGenerated(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	if _, err := w.k.StateSave(ctx, w.c, proto.StateSaveArgs{Agent: "ops", Key: "a", Value: "12345"}, nil); err != nil {
		t.Fatal(err)
	}
	read := func(n *Node) string {
		t.Helper()
		h, err := w.l.Open(ctx, w.c, n, syscall.O_RDONLY)
		if err != nil {
			t.Fatalf("open %s: %v", n.Kind.Name, err)
		}
		defer h.Release()
		b := readAll(t, h)
		if a, _ := w.l.Stat(ctx, w.c, Entry{File: n}, nil); a.Size != int64(len(b)) || a.Mode != 0o444 {
			t.Fatalf("stat of %s: %+v, read %d bytes", n.Kind.Name, a, len(b))
		}
		return b
	}
	status := &Node{Kind: AgentStatus, Agent: "ops"}
	if got := read(status); !strings.Contains(got, `"keys":1,"bytes":5`) {
		t.Fatalf("status: %s", got)
	}
	w.k.StateSave(ctx, w.c, proto.StateSaveArgs{Agent: "ops", Key: "b", Value: "x"}, nil)
	if got := read(status); !strings.Contains(got, `"keys":2,"bytes":6`) {
		t.Fatalf("status after a save: %s", got)
	}
	if got := read(&Node{Kind: Policy, Agent: "ops"}); !strings.Contains(got, "[") {
		t.Fatalf("policy: %q", got)
	}
	head := read(&Node{Kind: AuditHead})
	if _, err := w.l.Open(ctx, w.c, &Node{Kind: Policy, Agent: "ops"}, syscall.O_WRONLY); code(err) != proto.EROFS {
		t.Fatalf("write to the policy: %v", err)
	}
	// The refusal is recorded with the next group commit.
	for deadline := time.Now().Add(5 * time.Second); read(&Node{Kind: AuditHead}) == head; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the refused write to the policy is not on the audit log")
		}
	}
	if es, err := w.l.Approvals().Entries(ctx, w.c); err != nil || len(es) != 0 {
		t.Fatalf("approvals: %+v %v", es, err)
	}
	if _, err := w.l.Approvals().Lookup(ctx, w.c, "a1"); code(err) != proto.ENOENT {
		t.Fatalf("lookup of no approval: %v", err)
	}
	rec, err := w.k.MsgSend(ctx, w.c, proto.MsgSendArgs{To: "ops", Text: "hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(&Node{Kind: Message, Agent: "ops", ID: rec.ID}); !strings.HasPrefix(got, "---\nid: "+rec.ID+"\nfrom: operator\nto: ops\n") || !strings.HasSuffix(got, "read: false\n---\nhello\n") {
		t.Fatalf("message: %q", got)
	}
}

// TestDrafts: a file written into mem/KIND/ or inbox/ is submitted whole
// at the first close after a write, once; what is refused and how.
func TestDrafts(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	mem := &Node{Kind: NewMemory, Agent: "ops", ID: "semantic"}
	recall := func(q string) []proto.MemoryRecord {
		t.Helper()
		var got []proto.MemoryRecord
		err := w.k.MemRecall(ctx, w.c, proto.MemRecallArgs{Agent: "ops", Query: q}, nil, func(r *proto.MemoryRecord) error {
			got = append(got, *r)
			return nil
		})
		if err != nil && code(err) != proto.ENOENT {
			t.Fatal(err)
		}
		return got
	}

	// A shell's `> file`: the create's handle, a dup, the original closed
	// first (nothing written yet: nothing submitted), then written and
	// closed: remembered once, and the draft is done.
	d := w.l.NewDraft(mem, 64)
	h := must(d.Open(w.c, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, true))
	if end, err := h.Flush(ctx); end || err != nil {
		t.Fatalf("close before a write: %v %v", end, err)
	}
	if _, err := h.Write([]byte("backups run at 2am\n"), 0); err != nil {
		t.Fatal(err)
	}
	if size, _, done := d.Stat(); size != 19 || done {
		t.Fatalf("stat while written: %d %v", size, done)
	}
	if got := string(h.Read(make([]byte, 64), 8)); got != "run at 2am\n" {
		t.Fatalf("read back: %q", got)
	}
	if end, err := h.Flush(ctx); !end || err != nil {
		t.Fatalf("close after a write: %v %v", end, err)
	}
	if got := recall("backups"); len(got) != 1 || got[0].Text != "backups run at 2am" || got[0].Kind != "semantic" {
		t.Fatalf("recall: %+v", got)
	}
	if _, err := h.Write([]byte("more"), 0); code(err) != proto.EPERM {
		t.Fatalf("write after the submit: %v", err)
	}
	if end, err := h.Flush(ctx); !end || err != nil {
		t.Fatalf("second close: %v %v (submitted again?)", end, err)
	}
	if end, err := h.Release(false); !end || err != nil || d.Pending() {
		t.Fatalf("release: %v %v", end, err)
	}
	if _, err := d.Open(w.c, syscall.O_RDONLY, false); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("open of a draft done with: %v", err)
	}
	if len(recall("backups")) != 1 {
		t.Fatal("remembered twice")
	}

	// A bad front matter: refused at close, nothing remembered.
	d = w.l.NewDraft(mem, 64)
	h = must(d.Open(w.c, syscall.O_WRONLY, true))
	h.Write([]byte("---\ncolour: red\n---\nx"), 0)
	if end, err := h.Flush(ctx); !end || code(err) != proto.EINVAL {
		t.Fatalf("close of a bad front matter: %v %v", end, err)
	}
	// Past the limit: the write is refused, and so is the close.
	d = w.l.NewDraft(mem, 8)
	h = must(d.Open(w.c, syscall.O_WRONLY, true))
	if _, err := h.Write([]byte("123456789"), 0); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("write past the limit: %v", err)
	}
	if _, err := h.Flush(ctx); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("close after a refused write: %v", err)
	}
	if err := w.l.NewDraft(mem, 8).Truncate(9); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("truncate past the limit: %v", err)
	}
	// Unlinked while written: discarded, writes go nowhere, nothing sent.
	d = w.l.NewDraft(mem, 64)
	h = must(d.Open(w.c, syscall.O_WRONLY, true))
	h.Write([]byte("discarded text"), 0)
	if !d.Discard() || d.Discard() {
		t.Fatal("discard")
	}
	if n, err := h.Write([]byte("more"), 0); n != 4 || err != nil {
		t.Fatalf("write to a discarded draft: %d %v", n, err)
	}
	h.Release(false)
	// Closed empty (touch): nothing; the last close submits what was
	// written after the last flush (a mapping's pages).
	d = w.l.NewDraft(mem, 64)
	h = must(d.Open(w.c, syscall.O_WRONLY, true))
	if end, err := h.Release(false); !end || err != nil || d.Pending() {
		t.Fatalf("touch: %v %v", end, err)
	}
	d = w.l.NewDraft(mem, 64)
	h = must(d.Open(w.c, syscall.O_WRONLY, true))
	h2 := must(d.Open(w.c, syscall.O_RDWR|syscall.O_APPEND, false))
	h.Write([]byte("mapped "), 0)
	h2.Write([]byte("pages"), 0)
	h.Release(false)
	if !d.Pending() {
		t.Fatal("done with while a writer is open")
	}
	if end, err := h2.Release(false); !end || err != nil {
		t.Fatalf("last release: %v %v", end, err)
	}
	if got := recall("mapped"); len(got) != 1 || got[0].Text != "mapped pages" {
		t.Fatalf("recall of the last release's content: %+v", got)
	}
	if got := recall("discarded"); len(got) != 0 {
		t.Fatalf("a discarded draft was remembered: %+v", got)
	}

	// A message: sent at close, its front matter's reply_to taken.
	d = w.l.NewDraft(&Node{Kind: NewMessage, Agent: "ops"}, 1024)
	h = must(d.Open(w.c, syscall.O_WRONLY, true))
	h.Write([]byte("---\nreply_to: m1\n---\nhello\n"), 0)
	if _, err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ids := w.k.MsgIDs(w.c, "ops")
	if len(ids) != 1 {
		t.Fatalf("inbox: %q", ids)
	}
	if m, err := w.k.MsgRead(w.c, "ops", ids[0]); err != nil || m.Text != "hello" || m.ReplyTo != "m1" {
		t.Fatalf("message: %+v %v", m, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRunWork: a run on a host folder has work.diff, the bytes of
// work.diff, and work/, its folder with the run's changes over it,
// read-only, while the work is pending.
func TestRunWork(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	for name, text := range map[string]string{"a.txt": "41\n", "sub/b.txt": "b\n", "gone.txt": "x\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755)
		if err := os.WriteFile(filepath.Join(repo, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pa := proto.PolicySetArgs{Agent: "dev", Text: "[work]\nallow = [\"" + dir + "/**\"]\n"}
	if _, err := w.k.PolicySet(ctx, w.c, pa, raw(pa)); err != nil {
		t.Fatal(err)
	}
	sa := proto.SpawnArgs{Agent: "dev", Work: repo, Command: []string{"sh", "-c", "echo 42 > a.txt; rm gone.txt; mkdir new; echo n > new/n.txt"}}
	rec, err := w.k.RunSpawn(ctx, w.c, sa, raw(sa))
	if code(err) == proto.EPERM && strings.Contains(err.Error(), "sandbox") {
		t.Skipf("--work needs the sandbox: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	wa := []string{rec.ID}
	if err := w.k.RunWait(ctx, w.c, wa, raw(proto.RunsArgs{Runs: wa}), func(*proto.ExitRecord) error { return nil }); err != nil {
		t.Fatal(err)
	}
	run, err := w.l.Runs("dev").Lookup(ctx, w.c, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := run.Dir.Entries(ctx, w.c)
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "ctl out status work work.diff" {
		t.Fatalf("runs/%s/: %q", rec.ID, names)
	}
	wr := proto.WorkArgs{Run: rec.ID}
	diff, err := w.k.WorkDiff(ctx, w.c, wr, raw(wr))
	if err != nil || !strings.Contains(diff.Patch, "+42") {
		t.Fatalf("work.diff: %v\n%s", err, diff.Patch)
	}
	read := func(n *Node) (string, error) {
		h, err := w.l.Open(ctx, w.c, n, syscall.O_RDONLY)
		if err != nil {
			return "", err
		}
		defer h.Release()
		return readAll(t, h), nil
	}
	if got, err := read(w.file(t, "dev", rec.ID, "work.diff")); err != nil || got != diff.Patch {
		t.Fatalf("work.diff file: %v\n%q\nwant\n%q", err, got, diff.Patch)
	}
	// A tree walk, as grep -r makes it.
	var walk func(d Dir, p string) []string
	walk = func(d Dir, p string) []string {
		es, err := d.Entries(ctx, w.c)
		if err != nil {
			t.Fatalf("work/%s: %v", p, err)
		}
		var out []string
		for _, e := range es {
			if e.Dir != nil {
				out = append(out, walk(e.Dir, p+e.Name+"/")...)
				continue
			}
			text, err := read(e.File)
			if err != nil {
				t.Fatalf("work/%s%s: %v", p, e.Name, err)
			}
			if a, _ := w.l.Stat(ctx, w.c, e, nil); a.Size != int64(len(text)) || a.Mode != 0o444 {
				t.Errorf("stat of work/%s%s: %+v", p, e.Name, a)
			}
			out = append(out, p+e.Name+"="+strings.TrimSpace(text))
		}
		return out
	}
	work, err := run.Dir.Lookup(ctx, w.c, "work")
	if err != nil || work.Dir == nil {
		t.Fatalf("lookup work: %+v %v", work, err)
	}
	if got := strings.Join(walk(work.Dir, ""), " "); got != "a.txt=42 new/n.txt=n sub/b.txt=b" {
		t.Fatalf("work/: %q", got)
	}
	a, err := work.Dir.Lookup(ctx, w.c, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, fl := range []int{syscall.O_WRONLY, syscall.O_RDWR, syscall.O_RDONLY | syscall.O_TRUNC} {
		if _, err := w.l.Open(ctx, w.c, a.File, fl); code(err) != proto.EROFS {
			t.Errorf("open of work/a.txt with %#o: %v, want EROFS", fl, err)
		}
	}
	if _, err := work.Dir.Lookup(ctx, w.c, "gone.txt"); code(err) != proto.ENOENT {
		t.Errorf("lookup of the deleted gone.txt: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(b) != "41\n" {
		t.Errorf("the host's a.txt changed: %q", b)
	}
	// Discarded: the patch stays what ox-work diff says, work/ is empty.
	if _, err := w.k.WorkDiscard(ctx, w.c, wr, raw(wr)); err != nil {
		t.Fatal(err)
	}
	if got, err := read(w.file(t, "dev", rec.ID, "work.diff")); err != nil || got != diff.Patch {
		t.Errorf("work.diff of discarded work: %v %q", err, got)
	}
	if es, err := work.Dir.Entries(ctx, w.c); err != nil || len(es) != 0 {
		t.Errorf("work/ of discarded work: %+v %v", es, err)
	}
}

// TestRunStdin: what is written to stdin is the input of a run started
// through spawn, write after write, and eof written to ctl ends it; a
// run started otherwise has no stdin file.
func TestRunStdin(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	id := w.spawn(t, "ops", "cat\n")
	in := w.file(t, "ops", id, "stdin")
	for _, line := range []string{"one\n", "two three\n"} {
		h, err := w.l.Open(ctx, w.c, in, syscall.O_WRONLY|syscall.O_TRUNC)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := h.Write(ctx, []byte(line)); err != nil || n != len(line) {
			t.Fatalf("write %q to stdin: %d %v", line, n, err)
		}
		h.Release()
	}
	if _, err := w.l.Open(ctx, w.c, in, syscall.O_RDONLY); code(err) != proto.EACCES {
		t.Errorf("open of stdin for reading: %v", err)
	}
	if err := w.ctl(t, "ops", id, "eof"); err != nil {
		t.Fatalf("eof to ctl: %v", err)
	}
	h, err := w.l.Open(ctx, w.c, w.file(t, "ops", id, "out"), syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	out := readAll(t, h)
	h.Release()
	if !strings.Contains(out, `"text":"one"`) || !strings.Contains(out, `"text":"two three"`) || !strings.Contains(out, `"type":"exit"`) || !strings.Contains(out, `"status":0`) {
		t.Fatalf("cat's out:\n%s", out)
	}
	// The run has ended: its stdin takes nothing more.
	a := proto.StdinArgs{Run: id, Data: []byte("late\n")}
	if _, err := w.k.RunStdin(ctx, w.c, a, raw(a)); code(err) != proto.ESRCH {
		t.Errorf("a write after the end: %v, want ESRCH", err)
	}
	// A run of ox-spawn has its input given at its start.
	sa := proto.SpawnArgs{Agent: "ops", Command: []string{"sleep", "5"}}
	rec, err := w.k.RunSpawn(ctx, w.c, sa, raw(sa))
	if err != nil {
		t.Fatal(err)
	}
	defer w.ctl(t, "ops", rec.ID, "kill")
	run, err := w.l.Runs("ops").Lookup(ctx, w.c, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Dir.Lookup(ctx, w.c, "stdin"); code(err) != proto.ENOENT {
		t.Errorf("the stdin of a run of ox-spawn: %v", err)
	}
	a = proto.StdinArgs{Run: rec.ID, Data: []byte("x")}
	if _, err := w.k.RunStdin(ctx, w.c, a, raw(a)); code(err) != proto.EINVAL {
		t.Errorf("run.stdin of a run of ox-spawn: %v, want EINVAL", err)
	}
}
