package embed

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Timeout bounds one call to the endpoint: a slow endpoint must not hold
// a remember or recall for long, the local signal is there.
const Timeout = 10 * time.Second

// Signal is the dense signal as remember and recall use it: vectors from
// the endpoint, or nil (the local signal) when none is configured (a nil
// *Signal) or it fails; a failure is logged once per outage.
type Signal struct {
	e   *OpenAI
	url string
	log *slog.Logger
}

// NewSignal returns the signal of the endpoint at url (see New); "" is
// no endpoint: a nil Signal.
func NewSignal(url, model, keyEnv string, log *slog.Logger) *Signal {
	if url == "" {
		return nil
	}
	return &Signal{e: New(url, model, keyEnv), url: url, log: log}
}

// Docs returns the texts' vectors, or nil.
func (s *Signal) Docs(ctx context.Context, texts []string) [][]float32 {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := s.e.Embed(ctx, texts)
	s.result(err)
	return v
}

// Query returns the query's vector, or nil.
func (s *Signal) Query(ctx context.Context, q string) []float32 {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := s.e.Embed(ctx, []string{q})
	s.result(err)
	if err != nil {
		return nil
	}
	return v[0]
}

// down is set while the endpoint fails, so the error is logged once.
var down atomic.Bool

func (s *Signal) result(err error) {
	if err == nil {
		if down.Swap(false) {
			s.log.Info("embeddings endpoint is back; using its vectors", "url", s.url)
		}
		return
	}
	if !down.Swap(true) {
		s.log.Error("embeddings endpoint failed; falling back to the local dense signal", "url", s.url, "err", err)
	}
}
