// Package inbox keeps the agents' messages: per agent, an ordered,
// durable inbox of records (from, to, time, text, an optional reply-to and
// attached records), and which of them were received. The kernel decides
// who may send to whom and audits refusals; this package stores and
// delivers (Deliver: durable, then its audit entry through the kernel's
// audit.Recorder; Recv: a receive, following or waiting for more), says
// who a message is from (Sender), and how a message looks on the wire
// (Record, Records for msg.list, RecvArgs for msg.recv) and in an audit
// target (Target).
//
// Each agent's inbox is one append-only file, DATA/inbox/<agent>.jsonl: a
// line per message ({"msg":{...}}) and per acknowledgement ({"ack":"ID"}),
// each written and fdatasynced before Send or Ack returns, so a message
// accepted is a message kept across a crash (kill -9 included), and one
// not yet acknowledged is delivered again. A torn last line (a crash
// inside a write) is cut off at Open. Message ids are one sequence for
// all inboxes ("m" and 10 digits), so they sort by send order. An inbox
// holds at most its agent's quota (quota.go): received messages are
// dropped to make room, unread ones never.
package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/durable"
)

// MaxText bounds a message's text and attached records together.
const MaxText = 1 << 20

// Message is one message in an inbox.
type Message struct {
	ID   string    `json:"id"`
	From string    `json:"from"` // the sending agent; "" for an operator
	To   string    `json:"to"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
	// ReplyTo is the id of the message this one answers, if any.
	ReplyTo string `json:"reply_to,omitempty"`
	// Records are records attached as they came (JSON objects).
	Records []json.RawMessage `json:"records,omitempty"`
	// Sender is who sent it, for an operator (uid=N); the audit log has
	// the whole actor.
	Sender string `json:"sender,omitempty"`
	// Read is set once the message was received (Ack); not stored in the
	// message line.
	Read bool `json:"-"`
	// line is the length of the message's line in its inbox's file (for
	// the quota: see quota.go).
	line int64
}

// ErrNotFound is returned for a message id an inbox does not hold.
var ErrNotFound = errors.New("no such message")

// line is one line of an inbox file.
type line struct {
	Msg *Message `json:"msg,omitempty"`
	Ack string   `json:"ack,omitempty"`
}

// Store is every agent's inbox.
type Store struct {
	dir string
	mu  sync.Mutex
	seq uint64
	box map[string]*box
	// detached are the agents whose inboxes Open found detached
	// (Detach) and not yet settled.
	detached []string
	// Quota, if set, is the most bytes agent's inbox holds (0: no limit;
	// see quota.go). Called with the store's lock held.
	Quota func(agent string) int64
}

type box struct {
	f     *os.File
	msgs  []*Message // in id order
	byID  map[string]*Message
	wake  chan struct{} // closed and replaced at each new message
	bytes int64
}

// Open opens (creating) the inboxes under dir and reads them.
func Open(dir string) (*Store, error) {
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, box: map[string]*box{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if agent, ok := strings.CutSuffix(e.Name(), detachedSuffix); ok {
			// Read for its ids only: the sequence never goes back.
			b, err := s.load(agent, s.detachedPath(agent))
			if err != nil {
				s.Close()
				return nil, err
			}
			b.f.Close()
			s.detached = append(s.detached, agent)
			continue
		}
		agent, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok {
			continue
		}
		b, err := s.load(agent, s.path(agent))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.box[agent] = b
	}
	slices.Sort(s.detached)
	return s, nil
}

// load reads an inbox file, cutting off a torn last line.
func (s *Store) load(agent, path string) (*box, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	b := &box{f: f, byID: map[string]*Message{}, wake: make(chan struct{})}
	data, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	good := 0
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			break // torn: no newline
		}
		var l line
		if err := json.Unmarshal(data[off:off+nl], &l); err != nil {
			f.Close()
			return nil, fmt.Errorf("inbox %s: line at byte %d does not parse: %v", path, off, err)
		}
		switch {
		case l.Msg != nil:
			m := l.Msg
			m.line = int64(nl + 1)
			b.msgs = append(b.msgs, m)
			b.byID[m.ID] = m
			if n, ok := idSeq(m.ID); ok && n > s.seq {
				s.seq = n
			}
		case l.Ack != "":
			if m := b.byID[l.Ack]; m != nil {
				m.Read = true
			}
		}
		off += nl + 1
		good = off
	}
	if good < len(data) {
		if err := f.Truncate(int64(good)); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
	}
	b.bytes = int64(good)
	slices.SortFunc(b.msgs, func(x, y *Message) int { return strings.Compare(x.ID, y.ID) })
	return b, nil
}

func (s *Store) path(agent string) string { return filepath.Join(s.dir, agent+".jsonl") }

func idSeq(id string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "m"), 10, 64)
	return n, err == nil && strings.HasPrefix(id, "m")
}

// CheckID reports whether id has the form of a message id.
func CheckID(id string) error {
	if _, ok := idSeq(id); !ok || len(id) < 2 {
		return fmt.Errorf("%q is not a message id (m and digits, as ox-msg ls shows)", id)
	}
	return nil
}

func checkAgent(agent string) error {
	if agent == "" || agent == "." || agent == ".." || strings.ContainsAny(agent, "/\x00") {
		return fmt.Errorf("inbox: %q is not an agent name", agent)
	}
	return nil
}

// boxLocked returns agent's inbox, creating its file if create.
func (s *Store) boxLocked(agent string, create bool) (*box, error) {
	if b := s.box[agent]; b != nil || !create {
		return b, nil
	}
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.path(agent), os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := durable.SyncDir(s.dir); err != nil {
		f.Close()
		return nil, err
	}
	b := &box{f: f, byID: map[string]*Message{}, wake: make(chan struct{})}
	s.box[agent] = b
	return b, nil
}

// appendLine writes one line and makes it durable.
func (b *box) appendLine(l line) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if _, err := b.f.Write(data); err != nil {
		// A short write would leave a torn line in the middle: cut it.
		b.f.Truncate(b.bytes)
		return err
	}
	if err := unix.Fdatasync(int(b.f.Fd())); err != nil {
		return err
	}
	b.bytes += int64(len(data))
	return nil
}

// Send puts m into the inbox of m.To, giving it an id and, if unset, the
// time, and returns it once it is durable.
func (s *Store) Send(m Message) (Message, error) {
	if err := checkAgent(m.To); err != nil {
		return Message{}, err
	}
	size := len(m.Text)
	for _, r := range m.Records {
		size += len(r)
		if !json.Valid(r) || len(bytes.TrimSpace(r)) == 0 || bytes.TrimSpace(r)[0] != '{' {
			return Message{}, fmt.Errorf("an attached record is not a JSON object: %.60q", r)
		}
	}
	if size > MaxText {
		return Message{}, fmt.Errorf("message of %d bytes is over the limit of %d", size, MaxText)
	}
	if m.ReplyTo != "" {
		if err := CheckID(m.ReplyTo); err != nil {
			return Message{}, fmt.Errorf("reply-to: %v", err)
		}
	}
	if m.Time.IsZero() {
		m.Time = time.Now().UTC()
	}
	m.Read = false
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.boxLocked(m.To, true)
	if err != nil {
		return Message{}, err
	}
	if s.Quota != nil {
		if err := s.room(b, m.To, int64(size), s.Quota(m.To)); err != nil {
			return Message{}, err
		}
	}
	m.ID = fmt.Sprintf("m%010d", s.seq+1)
	before := b.bytes
	if err := b.appendLine(line{Msg: &m}); err != nil {
		return Message{}, fmt.Errorf("inbox of %s: %w", m.To, err)
	}
	s.seq++
	stored := m
	stored.line = b.bytes - before
	b.msgs = append(b.msgs, &stored)
	b.byID[m.ID] = &stored
	close(b.wake)
	b.wake = make(chan struct{})
	return m, nil
}

// List returns agent's messages after id after ("" for all), oldest
// first; only the unread ones if unread.
func (s *Store) List(agent, after string, unread bool) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.box[agent]
	if b == nil {
		return nil
	}
	var out []Message
	for _, m := range b.msgs {
		if (after == "" || m.ID > after) && (!unread || !m.Read) {
			out = append(out, *m)
		}
	}
	return out
}

// IDs are the ids of agent's messages after id after ("" for all),
// oldest first.
func (s *Store) IDs(agent, after string) []string {
	ms := s.List(agent, after, false)
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// Get returns one message of agent's inbox.
func (s *Store) Get(agent, id string) (Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.box[agent]; b != nil {
		if m := b.byID[id]; m != nil {
			return *m, nil
		}
	}
	return Message{}, fmt.Errorf("%w: %s has no message %s", ErrNotFound, agent, id)
}

// Ack marks messages of agent as received, durably. Ids already read are
// skipped; an unknown id fails before anything is marked.
func (s *Store) Ack(agent string, ids ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.box[agent]
	for _, id := range ids {
		if b == nil || b.byID[id] == nil {
			return fmt.Errorf("%w: %s has no message %s", ErrNotFound, agent, id)
		}
	}
	for _, id := range ids {
		m := b.byID[id]
		if m.Read {
			continue
		}
		if err := b.appendLine(line{Ack: id}); err != nil {
			return fmt.Errorf("inbox of %s: %w", agent, err)
		}
		m.Read = true
	}
	return nil
}

// Wait blocks until agent's inbox holds a message after id after ("" for
// any), or ctx ends.
func (s *Store) Wait(ctx context.Context, agent, after string, unread bool) error {
	for {
		s.mu.Lock()
		b := s.box[agent]
		var wake chan struct{}
		if b != nil {
			for i := len(b.msgs) - 1; i >= 0 && (after == "" || b.msgs[i].ID > after); i-- {
				if !unread || !b.msgs[i].Read {
					s.mu.Unlock()
					return nil
				}
			}
			wake = b.wake
		}
		s.mu.Unlock()
		if wake == nil {
			// No inbox yet: poll for its creation rarely. A send creates
			// it, and creation is rare enough for this to cost nothing.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// Unread counts agent's unread messages.
func (s *Store) Unread(agent string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if b := s.box[agent]; b != nil {
		for _, m := range b.msgs {
			if !m.Read {
				n++
			}
		}
	}
	return n
}

// An agent's removal takes its inbox with it as one change, across a
// crash too, although the inbox is not in the journal that makes the
// removal durable: Detach moves the inbox aside before the removal, and
// the removal's outcome settles it (Settle): gone with an agent that is
// gone, back with one that is still there. A crash in between leaves the
// file detached, and the next Open names it (Detached) for the kernel to
// settle once the journal's replay says whether the agent exists (issue
// 45: an agent.remove cut by kill -9 left the agent removed and its
// inbox kept, which a new agent of the name would have inherited).
const detachedSuffix = ".jsonl.removing"

func (s *Store) detachedPath(agent string) string {
	return filepath.Join(s.dir, agent+detachedSuffix)
}

// Detach moves agent's inbox aside, durably, before the agent's removal.
func (s *Store) Detach(agent string) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.box[agent]; b != nil {
		b.f.Close()
		delete(s.box, agent)
		close(b.wake)
	}
	if err := os.Rename(s.path(agent), s.detachedPath(agent)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return durable.SyncDir(s.dir)
}

// Detached names the inboxes Open found detached: the removals of their
// agents were cut by a crash, and wait for Settle.
func (s *Store) Detached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.detached)
}

// Settle ends the detachment of agent's inbox: removed with the agent
// when gone, with any inbox made meanwhile (a message sent while the
// removal ran went to an agent on its way out); else put back (the
// removal failed, or never reached the journal), unless an inbox was
// made meanwhile: then the detached one is kept beside it and reported.
func (s *Store) Settle(agent string, gone bool) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detached = slices.DeleteFunc(s.detached, func(a string) bool { return a == agent })
	old := s.detachedPath(agent)
	if gone {
		if b := s.box[agent]; b != nil {
			b.f.Close()
			delete(s.box, agent)
			close(b.wake)
			if err := durable.Remove(s.path(agent)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		err := durable.Remove(old)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return err
	}
	if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if s.box[agent] != nil {
		return fmt.Errorf("inbox of %s: kept detached as %s: a new inbox was made while its agent was being removed", agent, old)
	}
	if err := os.Rename(old, s.path(agent)); err != nil {
		return err
	}
	if err := durable.SyncDir(s.dir); err != nil {
		return err
	}
	b, err := s.load(agent, s.path(agent))
	if err != nil {
		return err
	}
	s.box[agent] = b
	return nil
}

// Remove deletes agent's inbox at once (Detach, then Settle gone).
func (s *Store) Remove(agent string) error {
	if err := s.Detach(agent); err != nil {
		return err
	}
	return s.Settle(agent, true)
}

// Close closes the files.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for _, b := range s.box {
		if cerr := b.f.Close(); err == nil {
			err = cerr
		}
	}
	s.box = map[string]*box{}
	return err
}
