package fleet

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/nats-io/nuid"
	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/serve"
)

// callMsg is a call as it goes to a node.
type callMsg struct {
	ID   string          `json:"id"`
	From string          `json:"from"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
	Cred callerCred      `json:"cred"`
	// To is the node the call is for, Expires when it stops being good
	// (Unix ms): with ID, what keeps a signed call from being sent again.
	To      string `json:"to,omitempty"`
	Expires int64  `json:"expires,omitempty"`
	// ArgsRef, in place of Args: args too big for one NATS message (a
	// spawn's stdin up to limits.max_value), put in the object store
	// bucketArgs under the call's id; the signed digest vouches for them.
	ArgsRef *argsRef `json:"args_ref,omitempty"`
	// ReplyKey is the caller's curve key (X..., fresh for the call): the
	// called node seals each message of the call's records to it, with
	// a curve key of its own that its signed ack names, so that only the
	// caller reads them and only the called node writes them.
	ReplyKey string `json:"reply_key,omitempty"`
}

// callAck is a called node's signed answer to a call it took: the curve
// key its records are sealed with.
type callAck struct {
	ID  string `json:"id"`
	Key string `json:"key,omitempty"`
}

// argsRef names a call's args in the object store: their size and
// BLAKE3 digest (hex).
type argsRef struct {
	Size   int    `json:"size"`
	Digest string `json:"digest"`
}

// callerCred is the identity a call carries: the called kernel checks the
// op as this caller's.
type callerCred struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Admin  bool     `json:"admin,omitempty"`
	Agent  string   `json:"agent,omitempty"`
	Grants []string `json:"grants,omitempty"`
	// Home, on a spawn, is the agent's policy and what it may still
	// spend, from its home: the node that signs the call (kernel/home.go).
	Home *proto.Home `json:"home,omitempty"`
}

// opHomeCharge is the call of a node that ran a guest's run to the
// agent's home, charging the run's use (Fleet.Charge): between nodes
// only, never a client's op.
const opHomeCharge = "fleet.home-charge"

// Charge charges a guest's run to its home node, as a signed call the
// home acts on once.
func (f *Fleet) Charge(ctx context.Context, node string, a proto.HomeCharge) (proto.HomeCharged, error) {
	var got proto.HomeCharged
	args, err := json.Marshal(a)
	if err != nil {
		return got, err
	}
	res, err := f.callOne(ctx, node, callerCred{UID: admin.UID}, opHomeCharge, args, func([]byte) error { return nil })
	if err != nil {
		return got, err
	}
	if len(res) > 0 {
		if err := json.Unmarshal(res, &got); err != nil {
			return got, proto.Errorf(proto.EBADMSG, "fleet: node %s's answer to a charge: %v", node, err)
		}
	}
	return got, nil
}

// Pick is the live node with the most room, where a spawn to "any" goes.
func (f *Fleet) Pick(ctx context.Context) (string, error) { return f.roomiest(ctx) }

// envelope is one message of a call's records in the reply stream.
type envelope struct {
	Item   json.RawMessage `json:"item,omitempty"`
	Beat   bool            `json:"beat,omitempty"`
	Done   bool            `json:"done,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *proto.Error    `json:"error,omitempty"`
}

// Call runs a.Op on a.Node, or on every node (proto.FleetAll), or for a
// spawn on the node with the most room (proto.FleetAny).
func (f *Fleet) Call(ctx context.Context, c *kernel.Cred, a proto.FleetCallArgs, emit func([]byte) error) (json.RawMessage, error) {
	cred := callerCred{UID: c.UID, GID: c.GID, Admin: c.Admin, Agent: c.Agent, Grants: c.Grants, Home: c.Home}
	switch a.Node {
	case proto.FleetAny:
		if a.Op != proto.OpRunSpawn {
			return nil, proto.Errorf(proto.EINVAL, "fleet.call: node %q is for a spawn; name a node or %q", proto.FleetAny, proto.FleetAll)
		}
		n, err := f.roomiest(ctx)
		if err != nil {
			return nil, err
		}
		a.Node = n
	case proto.FleetAll:
		return nil, f.callAll(ctx, cred, a, emit)
	default:
		if err := checkNode(a.Node); err != nil {
			return nil, err
		}
		if _, err := f.node(ctx, a.Node); err != nil {
			return nil, err
		}
	}
	return f.callOne(ctx, a.Node, cred, a.Op, a.Args, emit)
}

func checkNode(n string) error {
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return proto.Errorf(proto.EINVAL, "fleet.call: node %q: a node's name is letters, digits, '-' and '_'", n)
		}
	}
	return nil
}

// roomiest is the live node whose admission has the most room: not
// overloaded, fewest runs running and queued per allowed slot.
func (f *Fleet) roomiest(ctx context.Context) (string, error) {
	nodes, err := f.Nodes(ctx)
	if err != nil {
		return "", err
	}
	// The runs placed here lately: a node's heartbeat tells its load up
	// to a heartbeat ago, and six spawns in a row must not all go to the
	// node that looked emptiest before the first.
	f.placeMu.Lock()
	defer f.placeMu.Unlock()
	recent := map[string]int{}
	cut := time.Now().Add(-2 * f.hb)
	kept := f.placed[:0]
	for _, p := range f.placed {
		if p.at.After(cut) {
			kept = append(kept, p)
			recent[p.node]++
		}
	}
	f.placed = kept
	best, bestLoad := "", 0.0
	for _, n := range nodes {
		if !n.Alive || n.Host.Overloaded || !f.trust.known(n.Node) {
			continue
		}
		busy := float64(n.Admission.Running + n.Admission.Queued + recent[n.Node])
		if m := n.Admission.MaxConcurrent; m > 0 {
			if n.Admission.Running >= m {
				busy += 1e6 // full: its runs would queue
			}
			busy /= float64(m)
		}
		if best == "" || busy < bestLoad {
			best, bestLoad = n.Node, busy
		}
	}
	if best == "" {
		return "", proto.Errorf(proto.EAGAIN, "fleet: no node has room (every live node is overloaded; ox-status shows them)")
	}
	f.placed = append(f.placed, placement{best, time.Now()})
	return best, nil
}

// placement is a run placed on node at a time.
type placement struct {
	node string
	at   time.Time
}

// callAll calls every live node at once and merges their records; a node
// that fails says so in an error record of its own, the others go on.
func (f *Fleet) callAll(ctx context.Context, cred callerCred, a proto.FleetCallArgs, emit func([]byte) error) error {
	nodes, err := f.Nodes(ctx)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var emitErr error
	send := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if emitErr == nil {
			emitErr = emit(b)
		}
		return emitErr
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		if !n.Alive {
			continue
		}
		wg.Add(1)
		go func(node string) {
			defer wg.Done()
			res, err := f.callOne(ctx, node, cred, a.Op, a.Args, send)
			switch {
			case err != nil && ctx.Err() == nil:
				pe := asProto(err)
				b, _ := json.Marshal(map[string]string{"type": "error", "node": node, "code": pe.Code, "message": pe.Message})
				send(b)
			case len(res) > 0:
				send(res)
			}
		}(n.Node)
	}
	wg.Wait()
	if emitErr != nil {
		return emitErr
	}
	return ctx.Err()
}

// callOne runs op on node and streams its records back: the records go
// through the replicated reply stream, so that a NATS server lost on the
// way loses none of them, and an ordered consumer reads them in order.
func (f *Fleet) callOne(ctx context.Context, node string, cred callerCred, op string, args json.RawMessage, emit func([]byte) error) (json.RawMessage, error) {
	if _, err := f.bucket(ctx); err != nil {
		return nil, err
	}
	id := nuid.Next()
	// The reader of the call's records; started again after the last
	// record read when it stalls (its consumer was on a server lost).
	type next struct {
		m   jetstream.Msg
		err error
	}
	ch := make(chan next)
	var lastSeq uint64
	var msgs jetstream.MessagesContext
	read := func() error {
		if msgs != nil {
			msgs.Stop()
		}
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjReply + id}}
		if lastSeq > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, lastSeq+1
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cons, err := f.js.OrderedConsumer(cctx, streamReply, cfg)
		if err != nil {
			return proto.Errorf(proto.EHOSTUNREACH, "fleet: reading the records of a call: %v", err)
		}
		it, err := cons.Messages()
		if err != nil {
			return proto.Errorf(proto.EHOSTUNREACH, "fleet: reading the records of a call: %v", err)
		}
		msgs = it
		go func() {
			for {
				m, err := it.Next()
				if err != nil {
					return // stopped, or broken: the quiet timer starts another
				}
				select {
				case ch <- next{m, nil}:
				case <-ctx.Done():
					return
				}
			}
		}()
		return nil
	}
	if err := read(); err != nil {
		return nil, err
	}
	defer func() { msgs.Stop() }()
	cm := callMsg{ID: id, From: f.name, Op: op, Args: args, Cred: cred, To: node, Expires: time.Now().Add(callTTL).UnixMilli()}
	var box nkeys.KeyPair // the caller's side of the sealed records
	var err error
	if f.trust.kp != nil {
		if box, err = nkeys.CreateCurveKeys(); err != nil {
			return nil, err
		}
		if cm.ReplyKey, err = box.PublicKey(); err != nil {
			return nil, err
		}
	}
	if len(args) > f.inline() {
		ref, err := f.putArgs(ctx, id, args)
		if err != nil {
			return nil, err
		}
		defer f.dropArgs(id)
		cm.Args, cm.ArgsRef = nil, ref
	}
	body, _ := json.Marshal(cm)
	req := f.trust.seal(body)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	rep, err := f.nc.RequestWithContext(rctx, subjCall+node, req)
	cancel()
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, proto.Errorf(proto.EHOSTUNREACH, "node %s does not answer (it left the fleet, or its daemon stopped)", node)
		}
		return nil, proto.Errorf(proto.EHOSTUNREACH, "node %s: %v", node, err)
	}
	var refused envelope
	if json.Unmarshal(rep.Data, &refused) == nil && refused.Error != nil {
		return nil, refused.Error
	}
	// The records are sealed with the key the called node's signed ack
	// names: a message in the stream that does not open with it is no
	// record of this call (forged, or another's), and is dropped.
	var sender string
	if box != nil {
		body, err := f.trust.open(rep.Data, node)
		var ack callAck
		if err == nil && (json.Unmarshal(body, &ack) != nil || ack.ID != id || ack.Key == "") {
			err = errors.New("an ack that is not for this call")
		}
		if err != nil {
			return nil, proto.Errorf(proto.EACCES, "fleet: node %s's answer to the call: %v", node, err)
		}
		sender = ack.Key
	}
	defer func() {
		if ctx.Err() != nil {
			f.nc.Publish(subjCancel+id, nil)
		}
	}()

	// Silence longer than this pings the node; the node beats every
	// heartbeat during a call.
	quiet := 4 * f.hb
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	var run string
	items := 0
	heard := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			// Only the node's daemon answers its ping, over core NATS
			// (no JetStream leader to wait for). A node that does not
			// answer may be cut off (a partition, its NATS server
			// stopped) while the call goes on there: its records wait in
			// the reply stream, and the call waits for them as long as
			// [fleet] lost, not reporting as failed what may yet succeed.
			if f.ping(ctx, node) {
				heard = time.Now()
				// The node is there but its records do not come: read
				// them again from the last one seen.
				if err := read(); err != nil {
					f.log.Warn("fleet: reading a call's records again", "node", node, "err", err)
				}
			} else if silent := time.Since(heard); silent >= f.lost {
				what, again := op, ""
				if run != "" {
					what = "run " + run
					again = fmt.Sprintf("; ox-wait --node %s %s waits for it once the node is back", node, run)
				}
				return nil, proto.Errorf(proto.EHOSTUNREACH, "node %s has not answered for %s during %s (after %d records): its outcome is not known here, and it may still be running there%s", node, silent.Round(time.Second), what, items, again)
			} else if err := read(); err != nil {
				f.log.Warn("fleet: reading a call's records again", "node", node, "err", err)
			}
			timer.Reset(quiet)
		case n := <-ch:
			if md, err := n.m.Metadata(); err == nil {
				if md.Sequence.Stream <= lastSeq {
					continue // read again after a restart
				}
				lastSeq = md.Sequence.Stream
			}
			data := n.m.Data()
			if box != nil {
				if data, err = box.Open(data, sender); err != nil {
					f.log.Warn("fleet: a message in a call's records that its node did not seal: dropped", "node", node, "call", id)
					continue
				}
			}
			timer.Reset(quiet)
			heard = time.Now()
			var e envelope
			if err := json.Unmarshal(data, &e); err != nil {
				continue
			}
			switch {
			case e.Beat:
			case e.Done:
				if e.Error != nil {
					return nil, e.Error
				}
				if len(e.Result) == 0 {
					return nil, nil
				}
				return withNode(e.Result, node), nil
			case len(e.Item) > 0:
				items++
				if run == "" && op == proto.OpRunSpawn {
					var r struct{ Type, ID string }
					if json.Unmarshal(e.Item, &r) == nil && r.Type == proto.RecordRun {
						run = r.ID
					}
				}
				if err := emit(withNode(e.Item, node)); err != nil {
					return nil, err
				}
			}
		}
	}
}

// ping reports whether node's daemon answers.
func (f *Fleet) ping(ctx context.Context, node string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := f.nc.RequestWithContext(ctx, subjPing+node, nil)
	if err != nil {
		f.log.Warn("fleet: a node did not answer its ping", "node", node, "err", err)
	}
	return err == nil
}

// withNode adds "node" to a record (an object) that has none.
func withNode(rec json.RawMessage, node string) []byte {
	rec = bytes.TrimSpace(rec)
	// Only a record that begins with its node has one: a "node" inside a
	// value (a run's output) must not pass for it.
	if len(rec) < 2 || rec[0] != '{' || bytes.HasPrefix(rec, []byte(`{"node":`)) {
		return rec
	}
	out := make([]byte, 0, len(rec)+len(node)+12)
	out = append(out, `{"node":`...)
	out = strconv.AppendQuote(out, node)
	if len(bytes.TrimSpace(rec[1:])) > 1 {
		out = append(out, ',')
	}
	return append(out, rec[1:]...)
}

func asProto(err error) *proto.Error {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe
	}
	return proto.Errorf(proto.EIO, "%v", err)
}

// serveCall takes a call from a peer: the ack at once, then the op runs
// on its own goroutine with its records published to the reply stream.
func (f *Fleet) serveCall(m *nats.Msg) {
	var cm callMsg
	body := m.Data
	var s signed
	if json.Unmarshal(m.Data, &s) == nil && s.Sig != "" {
		body = s.Body
	}
	if err := json.Unmarshal(body, &cm); err != nil || cm.ID == "" {
		b, _ := json.Marshal(envelope{Done: true, Error: proto.Errorf(proto.EBADMSG, "fleet: a call that does not decode")})
		m.Respond(b)
		return
	}
	// Who sent it is whose key signed it: the name it gives is checked
	// against that key, and the call against its addressee, its expiry
	// and the ids seen.
	verified, err := f.trust.open(m.Data, cm.From)
	if err == nil {
		if json.Unmarshal(verified, &cm) != nil {
			err = errors.New("a signed call that does not decode")
		} else {
			err = f.trust.fresh(cm.To, cm.ID, cm.Expires)
		}
	}
	if err != nil {
		f.log.Warn("fleet: a call refused", "claims", cm.From, "op", cm.Op, "err", err)
		f.k.Refused(&kernel.Cred{UID: cm.Cred.UID, Agent: cm.Cred.Agent, Node: cm.From}, proto.OpFleetCall,
			"from "+cm.From+": "+cm.Op+": "+err.Error(), nil, proto.EACCES)
		b, _ := json.Marshal(envelope{Done: true, Error: proto.Errorf(proto.EACCES, "fleet: call refused: %v", err)})
		m.Respond(b)
		return
	}
	if !proto.FleetCallable[cm.Op] && cm.Op != opHomeCharge {
		b, _ := json.Marshal(envelope{Done: true, Error: proto.Errorf(proto.EINVAL, "fleet.call: op %q does not go to other nodes", cm.Op)})
		m.Respond(b)
		return
	}
	var box nkeys.KeyPair
	ack := callAck{ID: cm.ID}
	if cm.ReplyKey != "" {
		var err error
		if box, err = nkeys.CreateCurveKeys(); err == nil {
			ack.Key, err = box.PublicKey()
		}
		if err != nil {
			b, _ := json.Marshal(envelope{Done: true, Error: proto.Errorf(proto.EIO, "fleet: a key for the call's records: %v", err)})
			m.Respond(b)
			return
		}
	}
	b, _ := json.Marshal(ack)
	m.Respond(f.trust.seal(b))
	go f.runCall(cm, box)
}

// replyOut sends a call's records to the reply stream.
type replyOut struct {
	f *Fleet
	// box seals each message to the caller's key (to); nil: plain, for
	// an insecure caller.
	box  nkeys.KeyPair
	to   string
	ctx  context.Context
	subj string
	id   string
	n    atomic.Uint64
	mu   sync.Mutex
	acks []pending
}

type pending struct {
	fut  jetstream.PubAckFuture
	data []byte
	id   string
}

func (o *replyOut) send(e envelope) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if o.box != nil {
		if b, err = o.box.Seal(b, o.to); err != nil {
			return err
		}
	}
	// The message id makes a publish retried after a lost ack land once.
	msgID := o.id + "-" + strconv.FormatUint(o.n.Add(1), 10)
	o.mu.Lock()
	defer o.mu.Unlock()
	fut, err := o.f.js.PublishAsync(o.subj, b, jetstream.WithMsgID(msgID))
	if err != nil {
		return err
	}
	o.acks = append(o.acks, pending{fut, b, msgID})
	if len(o.acks) > 256 {
		o.settle(false)
	}
	return nil
}

// settle waits for the acks of what was sent, publishing again (same
// message id) what was not acknowledged; all, or only the older half.
func (o *replyOut) settle(all bool) {
	n := len(o.acks)
	if !all {
		n /= 2
	}
	for _, p := range o.acks[:n] {
		select {
		case <-p.fut.Ok():
			continue
		case <-p.fut.Err():
		case <-time.After(5 * time.Second):
		}
		// Cut off from the servers, the records wait here as long as the
		// caller waits for them ([fleet] lost).
		for deadline := time.Now().Add(o.f.lost); time.Now().Before(deadline); {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := o.f.js.Publish(ctx, o.subj, p.data, jetstream.WithMsgID(p.id))
			cancel()
			if err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	o.acks = append(o.acks[:0], o.acks[n:]...)
}

func (o *replyOut) Item(rec []byte) error   { return o.send(envelope{Item: rec}) }
func (o *replyOut) Flush()                  {}
func (o *replyOut) Follow() context.Context { return o.ctx }
func (o *replyOut) beat()                   { o.send(envelope{Beat: true}) }
func (o *replyOut) done(res json.RawMessage, err error) {
	e := envelope{Done: true, Result: res}
	if err != nil {
		e.Error = asProto(err)
	}
	o.send(e)
	o.mu.Lock()
	o.settle(true)
	o.mu.Unlock()
}

func (f *Fleet) runCall(cm callMsg, box nkeys.KeyPair) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := f.nc.Subscribe(subjCancel+cm.ID, func(*nats.Msg) { cancel() })
	if err == nil {
		defer sub.Unsubscribe()
	}
	out := &replyOut{f: f, box: box, to: cm.ReplyKey, ctx: ctx, subj: subjReply + cm.ID, id: cm.ID}
	if cm.ArgsRef != nil {
		args, err := f.getArgs(ctx, cm.ID, *cm.ArgsRef)
		if err != nil {
			f.k.Refused(&kernel.Cred{UID: cm.Cred.UID, Agent: cm.Cred.Agent, Node: cm.From}, proto.OpFleetCall,
				"from "+cm.From+": "+cm.Op+": "+err.Error(), nil, proto.EACCES)
			out.done(nil, err)
			return
		}
		cm.Args = args
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(f.hb)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				out.beat()
			}
		}
	}()
	// The caller is what the signing node vouches for, as this node's
	// trust maps it: another node's admin is an admin here only when
	// [fleet] admins names that node.
	c := &kernel.Cred{UID: cm.Cred.UID, GID: cm.Cred.GID, Admin: cm.Cred.Admin && f.trust.admin(cm.From), Agent: cm.Cred.Agent, Grants: cm.Cred.Grants, Node: cm.From}
	if cm.Op == proto.OpRunSpawn && cm.Cred.Home != nil {
		// The signer is the agent's home, and the policy it sends becomes
		// the agent's here: setting a policy is an admin's, so only a
		// node whose admin is this node's may (its sandbox grants could
		// open host folders here). Another's placement of its agent is
		// refused, not run under this node's default policy, which would
		// widen what the agent may do.
		if !f.trust.admin(cm.From) {
			err := proto.Errorf(proto.EPERM, "fleet: node %s may not place its agent %q here: its policy would become the agent's, and [fleet] admins of this node does not name it", cm.From, cm.Cred.Home.Agent)
			f.k.Refused(c, proto.OpRunSpawn, cm.Cred.Home.Agent+" [home "+cm.From+"]", cm.Args, proto.EPERM)
			close(stop)
			out.done(nil, err)
			return
		}
		c.Home = cm.Cred.Home
	}
	f.log.Debug("fleet: call", "from", cm.From, "op", cm.Op, "uid", c.UID, "agent", c.Agent)
	var res json.RawMessage
	if cm.Op == opHomeCharge {
		var a proto.HomeCharge
		if err = json.Unmarshal(cm.Args, &a); err != nil {
			err = proto.Errorf(proto.EBADMSG, "fleet: a charge that does not decode: %v", err)
		} else {
			var got proto.HomeCharged
			if got, err = f.k.HomeCharge(ctx, cm.From, a); err == nil {
				res, _ = json.Marshal(got)
			}
		}
	} else {
		res, err = f.k.ServeFleet(ctx, c, cm.Op, cm.Args, out)
	}
	close(stop)
	if err != nil && ctx.Err() != nil {
		return // the caller went away
	}
	out.done(res, err)
}

var _ serve.Out = (*replyOut)(nil)

// inline is how big a call's args may be to travel in the call itself:
// the servers' largest message, less room for the rest of the call and
// its signature.
func (f *Fleet) inline() int {
	return max(int(f.nc.MaxPayload())-16<<10, 64<<10)
}

// putArgs puts a call's args in the object store, for the called node
// to fetch (getArgs), and returns what the call says of them.
func (f *Fleet) putArgs(ctx context.Context, id string, args []byte) (*argsRef, error) {
	obj, err := f.argsStore(ctx)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := obj.PutBytes(pctx, id, args); err != nil {
		return nil, proto.Errorf(proto.EHOSTUNREACH, "fleet: storing the call's %d bytes of arguments: %v", len(args), err)
	}
	sum := blake3.Sum256(args)
	return &argsRef{Size: len(args), Digest: hex.EncodeToString(sum[:])}, nil
}

// getArgs fetches and removes the args of call id, which must be those
// its signed reference names.
func (f *Fleet) getArgs(ctx context.Context, id string, ref argsRef) (json.RawMessage, error) {
	obj, err := f.argsStore(ctx)
	if err != nil {
		return nil, err
	}
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := obj.GetBytes(gctx, id)
	if err != nil {
		return nil, proto.Errorf(proto.EHOSTUNREACH, "fleet: fetching the call's arguments: %v", err)
	}
	f.dropArgs(id)
	sum := blake3.Sum256(b)
	if len(b) != ref.Size || hex.EncodeToString(sum[:]) != ref.Digest {
		return nil, proto.Errorf(proto.EACCES, "fleet: call refused: its arguments in the object store are not those it was signed with (%d bytes, %d named)", len(b), ref.Size)
	}
	return b, nil
}

// dropArgs removes a call's args from the object store.
func (f *Fleet) dropArgs(id string) {
	obj, err := f.argsStore(context.Background())
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	obj.Delete(ctx, id)
}
