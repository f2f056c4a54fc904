package runq

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/supervisor"
)

type recorded struct {
	mu     sync.Mutex
	events []string
}

func (r *recorded) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorded) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func newQueue(t *testing.T, max int, startErr error) (*Queue, *supervisor.Supervisor, *recorded) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sup, err := supervisor.New(filepath.Join(t.TempDir(), "runs"), log)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorded{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	q := New(ctx, max, func() string { return "" }, sup, audit.Actor{UID: 1}, log, func(ctx context.Context, e *audit.Entry, event, agent, key string, data any) error {
		id := strings.TrimPrefix(e.Target, "a:")
		switch e.Op {
		case proto.OpRunQueue:
			rec.add("queued " + id)
		case proto.OpRunSpawn:
			rec.add("started " + id)
			return startErr
		case proto.OpRunKill:
			rec.add("kill " + id + " " + e.Result)
			return nil
		case proto.OpRunExit:
			// The end of a run that never started names its agent and
			// holds its record, by who ended it.
			if agent != "a" || data.(*proto.RunRecord).ID+" " != id[:strings.IndexByte(id, ' ')+1] || e.Result != "ok" {
				t.Errorf("run.exit %+v agent %q data %+v", e, agent, data)
			}
			rec.add("ended " + id)
		default:
			t.Errorf("entry %+v", e)
		}
		if _, ok := data.(*proto.RunRecord); !ok || event != "" || key != "" {
			t.Errorf("entry %+v: event %q key %q data %T", e, event, key, data)
		}
		return nil
	})
	sup.OnExit = func(r *supervisor.Run) { q.Release(r.Agent()) }
	t.Cleanup(sup.Close)
	return q, sup, rec
}

func spec(t *testing.T, id string, argv ...string) supervisor.Spec {
	return supervisor.Spec{ID: id, Agent: "a", Argv: argv, Dir: filepath.Join(t.TempDir(), id), Env: []string{"PATH=/usr/bin:/bin"}, Command: argv}
}

func TestQueueKillAndClose(t *testing.T) {
	q, _, rec := newQueue(t, 1, nil)
	ctx := context.Background()
	_, first, err := q.Admit(ctx, spec(t, "r1", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil)
	if err != nil || first == nil {
		t.Fatalf("first: %v %v", first, err)
	}
	qrec, r, err := q.Admit(ctx, spec(t, "r2", "/bin/sleep", "30"), audit.Actor{}, 5, 0, nil)
	if err != nil || r != nil || qrec.State != proto.RunQueued || qrec.Text != "r2 /bin/sleep 30: queued (priority 5)" {
		t.Fatalf("second: %+v %v %v", qrec, r, err)
	}
	_, _, err = q.Admit(ctx, spec(t, "r3", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if recs := q.Records(); len(recs) != 2 || recs[0].ID != "r2" || recs[1].ID != "r3" {
		t.Fatalf("queue order: %+v", recs)
	}
	if recs := q.Ps(false, func(agent string) bool { return agent == "a" }); len(recs) != 3 || recs[0].ID != "r1" || recs[1].ID != "r2" {
		t.Fatalf("ps: %+v", recs)
	}
	if recs := q.Ps(false, func(string) bool { return false }); len(recs) != 0 {
		t.Fatalf("ps of none: %+v", recs)
	}
	if n := q.Live("a"); n != 3 {
		t.Fatalf("a's live runs: %d, want the started one and the two queued", n)
	}
	if running, queued := q.State(); running != 1 || queued != 2 {
		t.Fatalf("state: %d %d", running, queued)
	}
	p := q.Lookup("r2")
	f := q.Follow(qrec)
	// STOP leaves it queued; TERM ends it there.
	if r, err := q.Kill(ctx, audit.Actor{}, p, syscall.SIGSTOP); r != nil || err != nil || q.Lookup("r2") != p {
		t.Fatalf("STOP: %v %v", r, err)
	}
	if r, err := q.Kill(ctx, audit.Actor{}, p, syscall.SIGTERM); r != nil || err != nil || q.Lookup("r2") != nil {
		t.Fatalf("TERM: %v %v", r, err)
	}
	// It ended in the queue with a log of its own: that is what it became.
	if r, err := Settled(ctx, p); err != nil || r == nil {
		t.Fatalf("settled after kill: %v %v", r, err)
	}
	if b := Became(p); b == nil || b.Record().Status == nil || *b.Record().Status != 128+int(syscall.SIGTERM) {
		t.Fatalf("the killed run's log: %+v", b)
	}
	select {
	case <-f.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the follower of a run killed in the queue never ended")
	}
	p3 := q.Lookup("r3")
	q.Close()
	if r, err := Settled(ctx, p3); err != nil || *r.Record().Status != 255 {
		t.Fatalf("settled after close: %v %v", r, err)
	}
	want := []string{"started r1", "queued r2", "queued r3", "ended r2 signal TERM", "ended r3 exit 255"}
	if got := rec.all(); len(got) != len(want) {
		t.Fatalf("hooks: %q, want %q", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("hooks: %q, want %q", got, want)
			}
		}
	}
	first.End("test over")
	<-first.Done()
}

func TestQueueStartsWhenSlotFrees(t *testing.T) {
	q, sup, rec := newQueue(t, 1, nil)
	ctx := context.Background()
	_, first, err := q.Admit(ctx, spec(t, "r1", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	qrec, _, err := q.Admit(ctx, spec(t, "r2", "/bin/true"), audit.Actor{}, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := q.Follow(qrec)
	first.End("make room")
	if p := q.Lookup("r2"); p != nil {
		if r, err := Settled(ctx, p); err != nil || r == nil {
			t.Fatalf("r2 did not start: %v", err)
		}
	} else if _, ok := sup.Get("r2"); !ok {
		t.Fatal("r2 is neither queued nor started")
	}
	select {
	case <-f.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("r2 never ended")
	}
	if got := f.Record(); got.State == proto.RunQueued {
		t.Fatalf("record after the end: %+v", got)
	}
	if got := rec.all(); len(got) != 3 || got[2] != "started r2" {
		t.Fatalf("hooks: %q", got)
	}
}

func TestQueueUnrecordedStartIsKilled(t *testing.T) {
	q, _, _ := newQueue(t, 0, errors.New("log full"))
	_, r, err := q.Admit(context.Background(), spec(t, "r1", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil)
	if err == nil || r != nil {
		t.Fatalf("a run whose start was not recorded was admitted: %v %v", r, err)
	}
}

func TestSignalRun(t *testing.T) {
	q, sup, _ := newQueue(t, 1, nil)
	ctx := context.Background()
	if _, _, err := q.Admit(ctx, spec(t, "r1", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Admit(ctx, spec(t, "r2", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	rec, agent, err := q.SignalRun(ctx, audit.Actor{}, nil, q.Lookup("r2"), syscall.SIGTERM)
	if err != nil || agent != "a" || rec.ID != "r2" || q.Lookup("r2") != nil {
		t.Fatalf("the queued run: %+v %q %v", rec, agent, err)
	}
	r, ok := sup.Get("r1")
	if !ok {
		t.Fatal("r1 did not start")
	}
	rec, agent, err = q.SignalRun(ctx, audit.Actor{}, r, nil, syscall.SIGKILL)
	if err != nil || agent != "a" || rec.ID != "r1" {
		t.Fatalf("the started run: %+v %q %v", rec, agent, err)
	}
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("r1 outlived SIGKILL")
	}
}

func TestExited(t *testing.T) {
	who := audit.Actor{UID: 0, PID: 7}
	st := 0
	rec := proto.RunRecord{ID: "r1", Agent: "a", Status: &st}
	limit, exit, wall := Exited(&rec, who, "d1")
	if limit != nil || wall != nil {
		t.Fatalf("a plain end: %+v %+v", limit, wall)
	}
	if *exit != (audit.Entry{Actor: who, Op: proto.OpRunExit, Target: "a:r1 exit 0", Args: "d1", Result: "ok"}) {
		t.Fatalf("exit %+v", exit)
	}
	st = 137
	rec.Signal, rec.Limits = "KILL", "12 forks refused at the process limit"
	limit, exit, _ = Exited(&rec, who, "d2")
	if exit.Target != "a:r1 signal KILL" {
		t.Errorf("exit %+v", exit)
	}
	if limit == nil || *limit != (audit.Entry{Actor: who, Op: proto.OpRunLimit, Target: "a:r1 12 forks refused at the process limit [limits]", Result: proto.EAGAIN}) {
		t.Errorf("limit %+v", limit)
	}
	rec.Limits, rec.Error = "memory", "wall time budget of 1m0s exceeded"
	limit, _, wall = Exited(&rec, who, "d3")
	if limit == nil || limit.Result != proto.ENOMEM {
		t.Errorf("limit %+v", limit)
	}
	if wall == nil || *wall != (audit.Entry{Actor: who, Op: proto.OpRunWall, Target: "a:r1", Result: proto.EDQUOT}) {
		t.Errorf("wall %+v", wall)
	}
}

func TestAdmission(t *testing.T) {
	q, _, _ := newQueue(t, 1, nil)
	ctx := context.Background()
	_, first, err := q.Admit(ctx, spec(t, "r1", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Admit(ctx, spec(t, "r2", "/bin/true"), audit.Actor{}, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := q.Admission(1, 4); got != (proto.Admission{Running: 1, Queued: 1, MaxConcurrent: 1, MaxPerAgent: 4}) {
		t.Fatalf("%+v", got)
	}
	first.End("test over")
	<-first.Done()
}

func TestSignalAudited(t *testing.T) {
	q, _, rec := newQueue(t, 1, nil)
	ctx := context.Background()
	_, first, err := q.Admit(ctx, spec(t, "r1", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Admit(ctx, spec(t, "r2", "/bin/true"), audit.Actor{}, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	// A queued run: it leaves the queue, ended 128+TERM.
	if r, err := q.SignalAudited(ctx, audit.Actor{}, nil, q.Lookup("r2"), syscall.SIGTERM, "d"); err != nil || r.ID != "r2" {
		t.Fatalf("%+v %v", r, err)
	}
	// A started one.
	if r, err := q.SignalAudited(ctx, audit.Actor{}, first, nil, syscall.SIGTERM, "d"); err != nil || r.ID != "r1" {
		t.Fatalf("%+v %v", r, err)
	}
	<-first.Done()
	// A signal that fails is audited with its errno, and returned.
	if _, err := q.SignalAudited(ctx, audit.Actor{}, first, nil, syscall.SIGTERM, "d"); err == nil {
		t.Fatal("a signal to a run that ended")
	}
	got := strings.Join(rec.all(), ", ")
	for _, want := range []string{"kill r2 SIGTERM ok", "kill r1 SIGTERM ok", "kill r1 SIGTERM E"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
