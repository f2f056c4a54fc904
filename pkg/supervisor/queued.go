package supervisor

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/oxios/oxios/pkg/proto"
)

// Ended registers a run that never started: it waited in the kernel's
// admission queue and was killed there, or oxiosd stopped first. Its log
// holds rec and then ex, so it is listed (ox-ps --all), followed and
// waited for like any ended run, and kept across restarts.
func (s *Supervisor) Ended(rec proto.RunRecord, ex proto.ExitRecord) (*Run, error) {
	st := ex.Status
	rec.State, rec.Status, rec.Signal, rec.Error, rec.Ended = proto.RunExited, &st, ex.Signal, ex.Error, &ex.Time
	rec.Text = runText(&rec)
	ex.Text = exitText(&ex)
	head := rec
	head.State, head.Status, head.Signal, head.Error, head.Ended = proto.RunQueued, nil, "", "", nil
	head.Text = runText(&head)
	a, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(&ex)
	if err != nil {
		return nil, err
	}
	data := append(append(append(a, '\n'), b...), '\n')
	name := filepath.Join(s.dir, rec.ID+".jsonl")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		return nil, err
	}
	r := &Run{s: s, spec: Spec{ID: rec.ID, Agent: rec.Agent}, rec: rec, changed: make(chan struct{}), done: make(chan struct{}), size: int64(len(data))}
	close(r.done)
	s.mu.Lock()
	s.runs[rec.ID] = r
	s.ended = append(s.ended, rec.ID)
	prune := s.pruneLocked()
	s.mu.Unlock()
	for _, id := range prune {
		s.removeFiles(id)
	}
	return r, nil
}
