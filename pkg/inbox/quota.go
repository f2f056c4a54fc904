package inbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/oxios/oxios/pkg/durable"
	"golang.org/x/sys/unix"
)

// Quotas. An inbox holds at most its agent's quota of bytes (Store.Quota:
// the recipient's policy, msg.quota), read messages and unread. A send
// that would go past it first drops received messages, oldest first,
// down to half the quota (so that a full inbox is rewritten once per half
// a quota of sends, not at each); one that still does not fit is refused
// with ErrFull, and nothing is dropped. Unread messages are never
// dropped: an inbox full of them stays full until its agent receives.
// Without a quota, one agent could fill the daemon's memory (an inbox is
// held in memory) and its disk by sending to another.

// ErrFull is the refusal of a message its recipient's inbox has no room
// for.
var ErrFull = errors.New("inbox full")

// lineOverhead bounds the bytes of a message's line beyond its text and
// records (its fields, quoting, an ack line), for the quota's check.
const lineOverhead = 512

// room makes room in b, agent's inbox, for a message of size bytes of
// text and records under quota, dropping received messages if need be.
// Called with s.mu held.
func (s *Store) room(b *box, agent string, size, quota int64) error {
	need := size + lineOverhead
	if quota <= 0 || b.bytes+need <= quota {
		return nil
	}
	if need > quota {
		return fmt.Errorf("%w: a message of %d bytes is more than the inbox of %s holds (msg.quota %d bytes)", ErrFull, size, agent, quota)
	}
	// Keep the unread messages, and the newest received ones that fit in
	// half the quota beside them (the newest message always: its id
	// carries the sequence of ids across a restart). A message's size is
	// what its line took (Message.line): a send refused by a full inbox
	// costs a pass over the inbox, not an encoding of it.
	keep := make([]bool, len(b.msgs))
	var unread int64
	for i, m := range b.msgs {
		if !m.Read || i == len(b.msgs)-1 {
			keep[i] = true
			unread += m.line + ackBytes(m)
		}
	}
	if unread+need > quota {
		return fmt.Errorf("%w: the inbox of %s holds %d bytes not yet received of its msg.quota of %d; %s must receive (ox-msg recv -a %s) before more can be sent", ErrFull, agent, unread, quota, agent, agent)
	}
	kept := unread
	for i := len(b.msgs) - 1; i >= 0; i-- {
		if keep[i] {
			continue
		}
		n := b.msgs[i].line + ackBytes(b.msgs[i])
		if kept+n+need > quota/2 {
			break // and the older ones go too
		}
		keep[i] = true
		kept += n
	}
	return s.rewrite(b, agent, keep)
}

// ackBytes is the length of m's ack line, if it was received.
func ackBytes(m *Message) int64 {
	if !m.Read {
		return 0
	}
	return int64(len(`{"ack":""}`) + len(m.ID) + 1)
}

// rewrite replaces b's file with the messages keep says, each received
// one with its ack, durably: a new file synced, renamed over the old one,
// the folder synced. A crash leaves the old file or the new one. Called
// with s.mu held.
func (s *Store) rewrite(b *box, agent string, keep []bool) error {
	var data []byte
	msgs := make([]*Message, 0, len(b.msgs))
	for i, m := range b.msgs {
		if !keep[i] {
			continue
		}
		l, err := json.Marshal(line{Msg: m})
		if err != nil {
			return err
		}
		m.line = int64(len(l) + 1)
		msgs = append(msgs, m)
		data = append(append(data, l...), '\n')
		if m.Read {
			data = fmt.Appendf(data, "{\"ack\":%q}\n", m.ID)
		}
	}
	path := s.path(agent)
	tmp := filepath.Join(s.dir, "."+agent+".jsonl.tmp")
	restore := func(err error) error {
		// The old file stands, and what b holds with it.
		return fmt.Errorf("inbox of %s: dropping received messages: %w", agent, err)
	}
	// Opened before it is renamed: the file b appends to from now on is
	// the one in place, whatever fails after the rename.
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return restore(err)
	}
	if _, err = f.Write(data); err == nil {
		err = unix.Fdatasync(int(f.Fd()))
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return restore(err)
	}
	for i, m := range b.msgs {
		if !keep[i] {
			delete(b.byID, m.ID)
		}
	}
	b.f.Close()
	b.f, b.msgs, b.bytes = f, msgs, int64(len(data))
	if err := durable.SyncDir(s.dir); err != nil {
		return fmt.Errorf("inbox of %s: %w", agent, err)
	}
	return nil
}
