package bus

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// History is the audit log as a stream catching up reads it: Scan reads
// its lines from a seq on, Name names the event of an entry of op with
// result (the syscall table's naming, so a replayed event is named as
// the live one was).
type History struct {
	Scan func(from uint64, fn func(line []byte) error) error
	Name func(op, result string) string
}

// Stream sends emit the events want selects (by event name and agent):
// first those of the entries of h from seq since on (since 0: none),
// replayed, then the live ones until ctx ends, at most size queued; a
// subscriber that falls behind gets a "lost" record with the count and
// goes on. flush is Follow's.
//
// It subscribes before the replay: an entry the scan misses was
// published to the audit log after the scan began, so before its bus
// event, which the queue then holds. Events the two share are dropped by
// seq.
func (b *Bus) Stream(ctx context.Context, size int, since uint64, h History, want func(name, agent string) bool, emit func(rec any) error, flush func() error) error {
	sub := b.Subscribe(size, func(ev *Event) bool { return want(ev.Name, ev.Agent) })
	defer sub.Close()
	var replayed uint64
	if since > 0 {
		err := h.Scan(since, func(line []byte) error {
			in, ok := audit.Peek(line)
			if !ok {
				return nil
			}
			replayed = in.Seq
			rec := Replayed(&in, h.Name(in.Op, in.Result))
			if !want(rec.Event, rec.Agent) {
				return nil
			}
			return emit(&rec)
		})
		if err != nil {
			return proto.AsError(err)
		}
	}
	return sub.Follow(ctx, replayed, flush, func(ev *Event) error {
		// Every subscriber gets the same record of a live event: it is
		// encoded once, for all of them.
		b, err := ev.Encoded(func() ([]byte, error) {
			rec := ev.Record()
			return proto.Marshal(&rec)
		})
		if err != nil {
			return err
		}
		return emit(json.RawMessage(b))
	}, func(lost uint64) error {
		return emit(&proto.LostRecord{Type: proto.RecordLost, Count: lost})
	})
}
