package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// maxHeads bounds the heads kept of one peer in memory and sent in one
// answer: past it the older half is thinned, so that old entries stay
// witnessed, more sparsely.
const maxHeads = 4096

// witnesses are the audit heads this node saw its peers publish, one file
// per peer (DATA/fleet/witness/NODE.jsonl, appended and synced), and what
// a head said against the ones before it.
type witnesses struct {
	dir    string
	log    *slog.Logger
	mu     sync.Mutex
	heads  map[string][]proto.WitnessHead
	alarms map[string]string
	files  map[string]*os.File
	busy   map[string]bool
}

// witnessLine is one line of a peer's file: a head, or an alarm.
type witnessLine struct {
	proto.WitnessHead
	Alarm string `json:"alarm,omitempty"`
}

func openWitnesses(dir string, log *slog.Logger) (*witnesses, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fleet: %v", err)
	}
	w := &witnesses{dir: dir, log: log, heads: map[string][]proto.WitnessHead{}, alarms: map[string]string{}, files: map[string]*os.File{}, busy: map[string]bool{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("fleet: %v", err)
	}
	for _, e := range ents {
		node, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok {
			continue
		}
		fh, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("fleet: %v", err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var l witnessLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue // a torn last line
			}
			if l.Alarm != "" {
				w.alarms[node] = l.Alarm
				continue
			}
			w.heads[node] = thin(append(w.heads[node], l.WitnessHead))
		}
		fh.Close()
	}
	return w, nil
}

// thin halves the older half of heads past maxHeads.
func thin(h []proto.WitnessHead) []proto.WitnessHead {
	if len(h) <= maxHeads {
		return h
	}
	half := len(h) / 2
	out := make([]proto.WitnessHead, 0, maxHeads)
	for i := 0; i < half; i += 2 {
		out = append(out, h[i])
	}
	return append(out, h[half:]...)
}

// see keeps a head that node published, and says (alarm) when it goes
// back or names an entry seen before with another hash. It returns the
// head kept before, when the new one went past it.
func (w *witnesses) see(node string, h proto.WitnessHead) (proto.WitnessHead, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	hs := w.heads[node]
	var alarm string
	var past proto.WitnessHead
	if n := len(hs); n > 0 {
		last := hs[n-1]
		switch {
		case h.Seq == last.Seq && h.Hash == last.Hash:
			return past, false
		case h.Seq > last.Seq:
			past = last
		case h.Seq == last.Seq:
			alarm = fmt.Sprintf("node %s published entry %d with hash %.16s, seen before as %.16s at %s: its log was rewritten", node, h.Seq, h.Hash, last.Hash, last.Time.Format(time.RFC3339))
		case h.Seq < last.Seq:
			alarm = fmt.Sprintf("node %s published head %d after head %d (seen %s): its log went back", node, h.Seq, last.Seq, last.Time.Format(time.RFC3339))
		}
	}
	if alarm != "" {
		w.raiseLocked(node, alarm)
	}
	// Kept even after an alarm: the older heads are the evidence, and
	// the newer ones what the node's own verify is held to.
	w.heads[node] = thin(append(hs, h))
	w.write(node, witnessLine{WitnessHead: h})
	return past, past.Seq != 0
}

func (w *witnesses) raise(node, alarm string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.raiseLocked(node, alarm)
}

// raiseLocked keeps the first alarm of node (it stays until the data dir's
// fleet/witness/NODE.jsonl is cleared by the admin).
func (w *witnesses) raiseLocked(node, alarm string) {
	if w.alarms[node] != "" {
		return
	}
	w.log.Error("fleet: the audit log of a peer does not match the heads it published", "node", node, "alarm", alarm)
	w.alarms[node] = alarm
	w.write(node, witnessLine{Alarm: alarm})
}

// checking claims the one recheck of node in flight; checked ends it.
func (w *witnesses) checking(node string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy[node] {
		return false
	}
	w.busy[node] = true
	return true
}

func (w *witnesses) checked(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.busy, node)
}

func (w *witnesses) write(node string, l witnessLine) {
	f := w.files[node]
	if f == nil {
		var err error
		f, err = os.OpenFile(filepath.Join(w.dir, node+".jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			w.log.Error("fleet: keeping a peer's audit head", "node", node, "err", err)
			return
		}
		w.files[node] = f
	}
	b, _ := json.Marshal(l)
	if _, err := f.Write(append(b, '\n')); err == nil {
		err = f.Sync()
	}
}

func (w *witnesses) list(node string) []proto.WitnessHead {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]proto.WitnessHead(nil), w.heads[node]...)
}

func (w *witnesses) alarm(node string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.alarms[node]
}

func (w *witnesses) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.files {
		f.Close()
	}
	w.files = map[string]*os.File{}
	return nil
}

// seeHead keeps a head a peer published.
func (f *Fleet) seeHead(m *nats.Msg) {
	node := strings.TrimPrefix(m.Subject, subjHead)
	if node == f.name || node == "" {
		return
	}
	body, err := f.trust.open(m.Data, node)
	if err != nil {
		// Reported as what it is: a head its node did not sign, never a
		// tamper of that node's log.
		f.log.Warn("fleet: a forged audit head ignored", "claims", node, "err", err)
		f.k.Refused(&kernel.Cred{Node: node}, proto.OpFleetWitness, "forged audit head claiming node "+node+": "+err.Error(), nil, proto.EACCES)
		return
	}
	var h proto.WitnessHead
	if json.Unmarshal(body, &h) != nil || h.Seq == 0 {
		return
	}
	if last, ok := f.wit.see(node, h); ok && f.wit.checking(node) {
		go f.recheck(node, last)
	}
}

// recheck asks node for the hash it has now at an entry this node saw it
// publish before: a log rewritten and grown past its old head publishes
// no head that contradicts one kept, but its old entries changed.
func (f *Fleet) recheck(node string, old proto.WitnessHead) {
	defer f.wit.checked(node)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q, _ := json.Marshal(old)
	m, err := f.nc.RequestWithContext(ctx, subjHash+node, q)
	if err != nil {
		f.log.Debug("fleet: a peer's hash of an old head", "node", node, "seq", old.Seq, "err", err)
		return // gone, or busy: the next head asks again
	}
	body, err := f.trust.open(m.Data, node)
	if err != nil {
		f.log.Warn("fleet: a forged answer to a recheck ignored", "claims", node, "err", err)
		return
	}
	var got proto.WitnessHead
	if json.Unmarshal(body, &got) != nil {
		return
	}
	f.log.Debug("fleet: rechecked a peer's old head", "node", node, "seq", old.Seq, "same", got.Hash == old.Hash)
	if got.Hash != old.Hash {
		now := "no such entry"
		if got.Hash != "" {
			now = fmt.Sprintf("hash %.16s", got.Hash)
		}
		f.wit.raise(node, fmt.Sprintf("node %s now has %s at entry %d, which it published as %.16s at %s: its log was rewritten or cut",
			node, now, old.Seq, old.Hash, old.Time.Format(time.RFC3339)))
	}
}

// answerHash tells a peer the local hash of the entry it names.
func (f *Fleet) answerHash(m *nats.Msg) {
	var q proto.WitnessHead
	if json.Unmarshal(m.Data, &q) != nil || q.Seq == 0 || m.Reply == "" {
		return
	}
	h, err := f.hashAt(context.Background(), q.Seq)
	if err != nil {
		return
	}
	b, _ := json.Marshal(proto.WitnessHead{Seq: q.Seq, Hash: h, Time: time.Now().UTC()})
	m.Respond(f.trust.seal(b))
}

// witnessAnswer is what a peer holds of a node's heads.
type witnessAnswer struct {
	Witness string              `json:"witness"`
	Alarm   string              `json:"alarm,omitempty"`
	Heads   []proto.WitnessHead `json:"heads"`
}

// answerWitness tells the node asking the heads of it this node holds.
func (f *Fleet) answerWitness(m *nats.Msg) {
	node := strings.TrimPrefix(m.Subject, subjWitness)
	if node == f.name || m.Reply == "" {
		return
	}
	b, _ := json.Marshal(witnessAnswer{Witness: f.name, Alarm: f.wit.alarm(node), Heads: f.wit.list(node)})
	m.Respond(b)
}

// Witness asks every peer for the heads of this node it holds and checks
// each against the local chain: one record per peer that answered.
func (f *Fleet) Witness(ctx context.Context, emit func(*proto.WitnessRecord) error) error {
	nodes, err := f.Nodes(ctx)
	if err != nil {
		return err
	}
	peers := 0
	for _, n := range nodes {
		if !n.Self && n.Alive {
			peers++
		}
	}
	inbox := f.nc.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := f.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return proto.Errorf(proto.EHOSTUNREACH, "fleet: %v", err)
	}
	defer sub.Unsubscribe()
	if err := f.nc.PublishRequest(subjWitness+f.name, inbox, nil); err != nil {
		return proto.Errorf(proto.EHOSTUNREACH, "fleet: %v", err)
	}
	var answers []witnessAnswer
	timeout := time.NewTimer(3 * time.Second)
	defer timeout.Stop()
collect:
	for len(answers) < peers {
		select {
		case m := <-ch:
			var a witnessAnswer
			if json.Unmarshal(m.Data, &a) == nil {
				answers = append(answers, a)
			}
		case <-timeout.C:
			break collect
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sort.Slice(answers, func(i, j int) bool { return answers[i].Witness < answers[j].Witness })
	if len(answers) == 0 {
		return emit(&proto.WitnessRecord{Type: proto.RecordWitness, Node: f.name, OK: true,
			Text: fmt.Sprintf("node %s: no peer answered (%d alive); the chain is checked only against itself", f.name, peers)})
	}
	for _, a := range answers {
		rec, err := f.check(ctx, a)
		if err != nil {
			return err
		}
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

// check holds the local chain to the heads one witness kept.
func (f *Fleet) check(ctx context.Context, a witnessAnswer) (proto.WitnessRecord, error) {
	rec := proto.WitnessRecord{Type: proto.RecordWitness, Node: f.name, Witness: a.Witness, Heads: len(a.Heads), OK: true}
	head, err := f.k.AuditHead(ctx, admin)
	if err != nil {
		return rec, err
	}
	sort.Slice(a.Heads, func(i, j int) bool { return a.Heads[i].Seq < a.Heads[j].Seq })
	var bad *proto.WitnessHead
	var local string
	for i := range a.Heads {
		h := &a.Heads[i]
		rec.Checked = max(rec.Checked, h.Seq)
		if h.Seq > head.Seq {
			if bad == nil {
				bad, local = h, ""
			}
			continue
		}
		got, err := f.hashAt(ctx, h.Seq)
		if err != nil {
			return rec, err
		}
		if got != h.Hash {
			if bad == nil {
				bad, local = h, got
			}
			continue
		}
		if bad == nil {
			rec.LastGood = h.Seq
		}
	}
	if bad == nil {
		rec.Text = fmt.Sprintf("node %s: %d heads held by %s match the local chain (newest: entry %d)", f.name, rec.Heads, a.Witness, rec.Checked)
		return rec, nil
	}
	rec.OK, rec.FirstBad = false, bad.Seq
	after := "from its first entry on"
	if rec.LastGood > 0 {
		after = fmt.Sprintf("after entry %d, the newest that still matches", rec.LastGood)
	}
	if local == "" {
		rec.Problem = fmt.Sprintf("truncated: node %s saw entry %d of node %s (hash %.16s, at %s) but the local log ends at entry %d; the log was cut or rewritten %s",
			a.Witness, bad.Seq, f.name, bad.Hash, bad.Time.Format(time.RFC3339), head.Seq, after)
	} else {
		rec.Problem = fmt.Sprintf("rewritten: entry %d of node %s as node %s saw it (hash %.16s, at %s) is not the local entry %d (hash %.16s); the log was rewritten %s",
			bad.Seq, f.name, a.Witness, bad.Hash, bad.Time.Format(time.RFC3339), bad.Seq, local, after)
	}
	rec.Text = rec.Problem
	return rec, nil
}

// hashAt is the hash of the local audit entry seq.
func (f *Fleet) hashAt(ctx context.Context, seq uint64) (string, error) {
	line, err := f.k.AuditShow(ctx, admin, seq)
	if err != nil {
		if pe, ok := err.(*proto.Error); ok && pe.Code == proto.ENOENT {
			return "", nil
		}
		return "", err
	}
	var e struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return "", proto.Errorf(proto.EIO, "audit entry %d does not decode: %v", seq, err)
	}
	return e.Hash, nil
}
