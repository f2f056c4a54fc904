package supervisor

import (
	"testing"
	"time"
)

func TestRecordsSampleTheLiveRuns(t *testing.T) {
	s := newSup(t, t.TempDir())
	defer s.Close()
	live := start(t, s, "r1", "/bin/sleep", "30")
	done := start(t, s, "r2", "/bin/true")
	<-done.Done()
	recs := s.Records([]*Run{live, done})
	if len(recs) != 2 || recs[0].ID != "r1" || recs[1].ID != "r2" {
		t.Fatalf("%+v", recs)
	}
	if recs[0].Procs < 1 || recs[0].RSS <= 0 {
		t.Fatalf("a live run's usage was not sampled: %+v", recs[0])
	}
	if recs[1].Procs != 0 {
		t.Fatalf("an ended run was sampled: %+v", recs[1])
	}
	live.End("test over")
	<-live.Done()
}

func TestEndUnlessDone(t *testing.T) {
	s := newSup(t, t.TempDir())
	defer s.Close()
	r := start(t, s, "r1", "/bin/sleep", "30")
	r.EndUnlessDone("over budget: test")
	select {
	case <-r.Done():
		t.Fatal("ended before its grace")
	case <-time.After(Grace / 2):
	}
	select {
	case <-r.Done():
	case <-time.After(2*Grace + 5*time.Second):
		t.Fatal("not ended after its grace")
	}
	if rec := r.Record(); rec.Error != "over budget: test" {
		t.Fatalf("%+v", rec)
	}
}
