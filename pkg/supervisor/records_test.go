package supervisor

import (
	"testing"
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
