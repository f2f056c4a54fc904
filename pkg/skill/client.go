package skill

import (
	"context"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// Client is Store over the daemon, for one agent: its state syscalls
// (ox-skill and ox-program keep skills and programs there).
type Client struct {
	C     *client.Client
	Agent string
}

var _ Store = Client{}

func (s Client) List(ctx context.Context, prefix string, fn func(proto.StateRecord) error) error {
	return s.C.StateList(ctx, s.Agent, prefix, fn)
}

func (s Client) Load(ctx context.Context, key string) ([]byte, error) {
	v, _, err := s.C.StateLoad(ctx, s.Agent, key)
	return v, err
}

func (s Client) Save(ctx context.Context, key string, v []byte) error {
	_, err := s.C.StateSave(ctx, s.Agent, key, v)
	return err
}

func (s Client) Delete(ctx context.Context, key string) error {
	_, err := s.C.StateDelete(ctx, s.Agent, key)
	return err
}
