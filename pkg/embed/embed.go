// Package embed is the client of an OpenAI-compatible /v1/embeddings
// endpoint, the optional dense signal of recall (config [memory]
// embeddings_url). Without one, recall runs on its local signals alone.
package embed

import (
	"context"
	"os"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/recall"
)

// OpenAI is recall's Embedder over an OpenAI-compatible
// /v1/embeddings endpoint (config [memory] embeddings_url).
type OpenAI struct {
	c     *openai.Client
	model string
}

// New returns the client of the endpoint at url, with the API key from
// the environment variable keyEnv.
func New(url, model, keyEnv string) *OpenAI {
	cfg := openai.DefaultConfig(os.Getenv(keyEnv))
	cfg.BaseURL = url
	return &OpenAI{c: openai.NewClientWithConfig(cfg), model: model}
}

// Embed returns one vector per text.
func (e *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	resp, err := e.c.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{Input: texts, Model: openai.EmbeddingModel(e.model)})
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index >= 0 && d.Index < len(out) {
			out[d.Index] = d.Embedding
		}
	}
	for _, v := range out {
		if v == nil {
			return nil, ErrShort
		}
	}
	return out, nil
}

type embedError string

func (e embedError) Error() string { return string(e) }

const ErrShort = embedError("the endpoint returned fewer vectors than texts")

var _ recall.Embedder = (*OpenAI)(nil)
