package kernel

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/oxios/oxios/pkg/memory"
)

// embedTimeout bounds one call to the endpoint: a slow endpoint must not
// hold a remember or recall for long, the local signal is there.
const embedTimeout = 10 * time.Second

// embedDocs returns the memories' vectors, or nil (local signal) when no
// endpoint is configured or it fails; a failure is logged once per outage.
func (k *Kernel) embedDocs(ctx context.Context, mems []*memory.Memory) [][]float32 {
	if k.emb == nil {
		return nil
	}
	texts := make([]string, len(mems))
	for i, m := range mems {
		texts[i] = m.Text
	}
	ctx, cancel := context.WithTimeout(ctx, embedTimeout)
	defer cancel()
	v, err := k.emb.Embed(ctx, texts)
	k.embedResult(err)
	return v
}

// embedQuery returns the query's vector, or nil.
func (k *Kernel) embedQuery(ctx context.Context, q string) []float32 {
	if k.emb == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, embedTimeout)
	defer cancel()
	v, err := k.emb.Embed(ctx, []string{q})
	k.embedResult(err)
	if err != nil {
		return nil
	}
	return v[0]
}

// embedDown is set while the endpoint fails, so the error is logged once.
var embedDown atomic.Bool

func (k *Kernel) embedResult(err error) {
	if err == nil {
		if embedDown.Swap(false) {
			k.log.Info("embeddings endpoint is back; using its vectors", "url", k.cfg.Memory.EmbeddingsURL)
		}
		return
	}
	if !embedDown.Swap(true) {
		k.log.Error("embeddings endpoint failed; falling back to the local dense signal", "url", k.cfg.Memory.EmbeddingsURL, "err", err)
	}
}
