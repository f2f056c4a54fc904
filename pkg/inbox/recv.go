package inbox

import (
	"context"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// RecvOptions is how Recv receives.
type RecvOptions struct {
	After string // receive the messages after this id ("": all unread)
	Max   int    // stop after this many (0: no limit)
	Peek  bool   // leave the messages unread
	// Follow waits for more messages until ctx ends or Max were
	// received; without it, Wait is how long to wait for a first message
	// (0: not at all).
	Follow bool
	Wait   time.Duration
}

// Recv hands agent's unread messages to emit, oldest first, and marks
// each read once emit took it (unless o.Peek). It returns emit's error,
// the wire's error of a failure to mark one read, ctx's error when ctx ends while following or waiting for
// a first message, or nil once done (o.Max received, nothing more to
// take without o.Follow, or the wait ran out).
func (s *Store) Recv(ctx context.Context, agent string, o RecvOptions, emit func(Message) error) error {
	after, n := o.After, 0
	for {
		ms := s.List(agent, after, true)
		for _, m := range ms {
			if err := emit(m); err != nil {
				return err
			}
			if !o.Peek {
				if err := s.Ack(agent, m.ID); err != nil {
					return proto.AsError(err)
				}
			}
			after = m.ID
			n++
			if o.Max > 0 && n >= o.Max {
				return nil
			}
		}
		if !o.Follow && (n > 0 || o.Wait == 0) {
			return nil
		}
		wctx := ctx
		if !o.Follow {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, o.Wait)
			defer cancel()
		}
		if err := s.Wait(wctx, agent, after, true); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil // the wait ran out: no message
		}
	}
}
