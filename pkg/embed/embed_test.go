package embed

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestEmbedOrderAndShort: vectors come back by their index whatever order
// the endpoint sends them in, and an answer with fewer vectors than texts
// is an error, not a silent nil vector.
func TestEmbedOrderAndShort(t *testing.T) {
	short := false
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Input []string }
		json.NewDecoder(r.Body).Decode(&req)
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i := len(req.Input) - 1; i >= 0; i-- {
			if short && i == 0 {
				continue
			}
			data = append(data, item{"embedding", i, []float32{float32(i), 1}})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "m"})
	}))
	defer s.Close()
	e := New(s.URL+"/v1", "m", "NO_SUCH_KEY_ENV")
	vs, err := e.Embed(context.Background(), []string{"a", "b", "c"})
	if err != nil || len(vs) != 3 || vs[0][0] != 0 || vs[2][0] != 2 {
		t.Fatalf("Embed: %v %v", vs, err)
	}
	short = true
	if _, err := e.Embed(context.Background(), []string{"a", "b"}); !errors.Is(err, ErrShort) {
		t.Fatalf("a short answer: %v", err)
	}
}
