// Package fleet joins oxiosd hosts over NATS with JetStream (issue 24): a
// key-value bucket holds each node's state (heartbeats that expire), calls
// go to a node's subject and stream their records back through a
// replicated stream, and every node keeps the audit heads its peers
// publish, so that a rewrite of one node's log is caught by the others.
//
// It is a front end of the kernel, like the socket server: what it does on
// a node, it does through the kernel's syscalls.
package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/serve"
)

// Names in NATS. One fleet per NATS account.
const (
	bucketNodes = "oxios_nodes"
	bucketArgs  = "oxios_args" // object store: the args of calls too big for a message
	streamReply = "OXIOS_REPLY"
	subjReply   = "oxios.reply."   // + call id: a call's records, in the stream
	subjCall    = "oxios.call."    // + node: calls to the node
	subjCancel  = "oxios.cancel."  // + call id: the caller went away
	subjHead    = "oxios.head."    // + node: its audit head
	subjWitness = "oxios.witness." // + node: who holds heads of it?
	subjPing    = "oxios.ping."    // + node: is its daemon there?
	subjHash    = "oxios.hash."    // + node: its hash of an entry now
)

// Kernel is what the fleet calls of its node's kernel.
type Kernel interface {
	AuditHead(ctx context.Context, c *kernel.Cred) (proto.AuditHead, error)
	AuditShow(ctx context.Context, c *kernel.Cred, seq uint64) ([]byte, error)
	Resources(ctx context.Context, c *kernel.Cred, a proto.ResourcesArgs, raw []byte) (proto.ResourcesRecord, error)
	Events(ctx context.Context, c *kernel.Cred, a proto.EventsArgs, raw []byte, emit func(rec any) error, flush func() error) error
	ServeFleet(ctx context.Context, c *kernel.Cred, op string, args json.RawMessage, out serve.Out) (json.RawMessage, error)
	// Refused audits a refusal (a message no trusted node signed).
	Refused(c *kernel.Cred, op, target string, raw []byte, code string)
	// HomeCharge charges a guest's run that ended on node from to its
	// agent, which lives here.
	HomeCharge(ctx context.Context, from string, a proto.HomeCharge) (proto.HomeCharged, error)
}

// admin is the node itself, as it reads its own audit head.
var admin = &kernel.Cred{Admin: true}

// Fleet is this node's membership in a fleet.
type Fleet struct {
	cfg  config.Fleet
	name string
	hb   time.Duration
	lost time.Duration // [fleet] lost

	placeMu sync.Mutex
	placed  []placement // runs this node placed with "any" lately (roomiest)
	k       Kernel
	log     *slog.Logger
	server  string
	started time.Time

	nc *nats.Conn
	js jetstream.JetStream

	mu    sync.Mutex
	nodes jetstream.KeyValue // nil until the bucket is there

	argsMu sync.Mutex
	args   jetstream.ObjectStore // argsStore
	ready  chan struct{}         // closed once nodes is set

	wit   *witnesses
	trust *trust
	// headCh wakes the heartbeat to publish the audit head now.
	headCh chan struct{}
	subs   []*nats.Subscription
	wg     sync.WaitGroup
	stop   context.CancelFunc
}

// Options names what Join needs besides the [fleet] table.
type Options struct {
	Kernel Kernel
	Data   string // the daemon's data dir: the heads of peers go in DATA/fleet
	Server string // "oxiosd/VERSION"
	Log    *slog.Logger
}

// Join connects to the NATS servers and starts the node's part: its
// heartbeat, its audit heads, its answers to calls. The servers need not
// be up yet: the client connects (and reconnects) in the background.
func Join(ctx context.Context, cfg config.Fleet, o Options) (*Fleet, error) {
	tr, err := newTrust(cfg)
	if err != nil {
		return nil, err
	}
	if tr.insecure {
		o.Log.Warn("fleet: insecure = true: calls and audit heads are not signed, and anyone who reaches the NATS servers may call this node as anyone")
	}
	wit, err := openWitnesses(filepath.Join(o.Data, "fleet", "witness"), o.Log)
	if err != nil {
		return nil, err
	}
	f := &Fleet{
		cfg: cfg, name: cfg.Node, hb: time.Duration(cfg.Heartbeat), lost: time.Duration(cfg.Lost), k: o.Kernel, log: o.Log,
		server: o.Server, started: time.Now().UTC(), ready: make(chan struct{}),
		wit: wit, trust: tr, headCh: make(chan struct{}, 1),
	}
	opts := []nats.Option{
		nats.Name("oxiosd " + cfg.Node),
		// Answers come to inboxes of the node's own, which the servers'
		// permissions let only it read (contrib/fleet).
		nats.CustomInboxPrefix(InboxPrefix(cfg.Node)),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		// A server that stops answering (stopped, partitioned away) is
		// left for another of the cluster within a few heartbeats, not
		// the two-minute pings of the default, during which every call
		// through it would wait.
		nats.PingInterval(pingInterval(time.Duration(cfg.Heartbeat))),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				o.Log.Warn("fleet: disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { o.Log.Info("fleet: reconnected", "server", nc.ConnectedUrlRedacted()) }),
	}
	switch {
	case cfg.Creds != "":
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	case cfg.NKey != "":
		opt, err := nats.NkeyOptionFromSeed(cfg.NKey)
		if err != nil {
			return nil, fmt.Errorf("fleet.nkey %s: %v", cfg.NKey, err)
		}
		opts = append(opts, opt)
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	nc, err := nats.Connect(strings.Join(cfg.Servers, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("fleet: connecting to %s: %v", strings.Join(cfg.Servers, ","), err)
	}
	f.nc = nc
	f.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, err
	}
	for subj, h := range map[string]nats.MsgHandler{
		subjCall + f.name: f.serveCall,
		subjHead + "*":    f.seeHead,
		subjWitness + "*": f.answerWitness,
		subjPing + f.name: func(m *nats.Msg) { m.Respond(nil) },
		subjHash + f.name: func(m *nats.Msg) { go f.answerHash(m) },
	} {
		sub, err := nc.Subscribe(subj, h)
		if err != nil {
			nc.Close()
			return nil, err
		}
		f.subs = append(f.subs, sub)
	}
	ctx, f.stop = context.WithCancel(ctx)
	f.wg.Add(2)
	go f.setup(ctx)
	go f.watchCommits(ctx)
	return f, nil
}

// InboxPrefix is where a node's answers come: the servers let each
// node's user subscribe to its own inboxes only (oxiosd(8), Fleet).
func InboxPrefix(node string) string { return "_INBOX_" + node }

// Name is the node's name in the fleet.
func (f *Fleet) Name() string { return f.name }

// setup makes the bucket and the stream (retrying until NATS answers),
// then beats.
func (f *Fleet) setup(ctx context.Context) {
	defer f.wg.Done()
	for {
		err := f.makeStores(ctx)
		if err == nil {
			break
		}
		f.log.Warn("fleet: JetStream not ready; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	f.log.Info("fleet: joined", "node", f.name, "server", f.nc.ConnectedUrlRedacted())
	f.beat(ctx)
	t := time.NewTicker(f.hb)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.beat(ctx)
		case <-f.headCh:
			f.publishHead(ctx)
		}
	}
}

func (f *Fleet) makeStores(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kv, err := f.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: bucketNodes, Description: "oxiosd nodes: state at the last heartbeat",
		TTL: 3 * f.hb, Replicas: f.cfg.Replicas, Storage: jetstream.MemoryStorage,
	})
	if err != nil {
		return fmt.Errorf("bucket %s: %w", bucketNodes, err)
	}
	_, err = f.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: streamReply, Description: "oxiosd fleet calls: the records each call streams back",
		Subjects: []string{subjReply + ">"}, MaxAge: time.Hour, Replicas: f.cfg.Replicas,
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", streamReply, err)
	}
	f.mu.Lock()
	f.nodes = kv
	f.mu.Unlock()
	close(f.ready)
	return nil
}

// bucket waits (as long as ctx lets it) for the node bucket.
func (f *Fleet) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	select {
	case <-f.ready:
		return f.nodes, nil
	case <-ctx.Done():
		return nil, proto.Errorf(proto.EHOSTUNREACH, "fleet: not connected to NATS yet (%s)", strings.Join(f.cfg.Servers, ","))
	}
}

// beat writes the node's record and publishes its audit head.
func (f *Fleet) beat(ctx context.Context) {
	rec := f.record(ctx)
	b, _ := json.Marshal(rec)
	pctx, cancel := context.WithTimeout(ctx, f.hb)
	defer cancel()
	if _, err := f.nodes.Put(pctx, f.name, b); err != nil && ctx.Err() == nil {
		f.log.Debug("fleet: heartbeat not written", "err", err)
	}
	f.sendHead(rec.AuditSeq, rec.AuditHash)
}

func (f *Fleet) record(ctx context.Context) proto.NodeRecord {
	rec := proto.NodeRecord{Type: proto.RecordNode, Node: f.name, Server: f.server, Started: f.started, Seen: time.Now().UTC()}
	if h, err := f.k.AuditHead(ctx, admin); err == nil {
		rec.AuditSeq, rec.AuditHash = h.Seq, h.Hash
	}
	if r, err := f.k.Resources(ctx, admin, proto.ResourcesArgs{}, nil); err == nil {
		rec.Admission, rec.Host = r.Admission, r.Host
	}
	return rec
}

func (f *Fleet) publishHead(ctx context.Context) {
	if h, err := f.k.AuditHead(ctx, admin); err == nil {
		f.sendHead(h.Seq, h.Hash)
	}
}

func (f *Fleet) sendHead(seq uint64, hash string) {
	if seq == 0 {
		return
	}
	b, _ := json.Marshal(proto.WitnessHead{Seq: seq, Hash: hash, Time: time.Now().UTC()})
	f.nc.Publish(subjHead+f.name, f.trust.seal(b))
}

// watchCommits publishes the audit head after every commit, besides the
// heartbeat's.
func (f *Fleet) watchCommits(ctx context.Context) {
	defer f.wg.Done()
	for ctx.Err() == nil {
		err := f.k.Events(ctx, admin, proto.EventsArgs{Types: []string{proto.EventCommit}}, nil, func(any) error {
			select {
			case f.headCh <- struct{}{}:
			default:
			}
			return nil
		}, func() error { return nil })
		if ctx.Err() != nil {
			return
		}
		f.log.Warn("fleet: commit events ended; resubscribing", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// Nodes lists the nodes whose heartbeat has not expired.
func (f *Fleet) Nodes(ctx context.Context) ([]proto.NodeRecord, error) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kv, err := f.bucket(wctx)
	if err != nil {
		return nil, err
	}
	// The keys from the stream's subjects, not kv.Keys: its watcher is a
	// consumer that may sit on a server just lost, and hang.
	st, err := f.js.Stream(wctx, "KV_"+bucketNodes)
	if err != nil {
		return nil, proto.Errorf(proto.EHOSTUNREACH, "fleet: listing nodes: %v", err)
	}
	info, err := st.Info(wctx, jetstream.WithSubjectFilter("$KV."+bucketNodes+".>"))
	if err != nil {
		return nil, proto.Errorf(proto.EHOSTUNREACH, "fleet: listing nodes: %v", err)
	}
	var out []proto.NodeRecord
	for subj := range info.State.Subjects {
		key := strings.TrimPrefix(subj, "$KV."+bucketNodes+".")
		e, err := kv.Get(wctx, key)
		if err != nil {
			continue // deleted (a node that left), or expired
		}
		var rec proto.NodeRecord
		if json.Unmarshal(e.Value(), &rec) != nil {
			continue
		}
		rec.Alive = time.Since(rec.Seen) < 3*f.hb
		rec.Self = rec.Node == f.name
		rec.Alarm = f.wit.alarm(rec.Node)
		state := "up"
		if !rec.Alive {
			state = "silent"
		}
		rec.Text = fmt.Sprintf("%s %s, %d running, %d queued, audit head %d", rec.Node, state, rec.Admission.Running, rec.Admission.Queued, rec.AuditSeq)
		if rec.Alarm != "" {
			rec.Text += "; ALARM: " + rec.Alarm
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// node is one node's record, or EHOSTUNREACH.
func (f *Fleet) node(ctx context.Context, name string) (proto.NodeRecord, error) {
	nodes, err := f.Nodes(ctx)
	if err != nil {
		return proto.NodeRecord{}, err
	}
	if !f.trust.known(name) {
		return proto.NodeRecord{}, proto.Errorf(proto.EACCES, "node %q is not in [fleet.peers] of this node: a call goes only to a node whose key it knows", name)
	}
	for _, n := range nodes {
		if n.Node == name {
			return n, nil
		}
	}
	return proto.NodeRecord{}, proto.Errorf(proto.EHOSTUNREACH, "no node %q in the fleet (ox-status lists the nodes)", name)
}

// Close leaves the fleet: the node's record goes, the connection drains.
func (f *Fleet) Close() error {
	f.stop()
	f.wg.Wait()
	select {
	case <-f.ready:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		f.nodes.Delete(ctx, f.name)
		cancel()
	default:
	}
	for _, s := range f.subs {
		s.Unsubscribe()
	}
	f.nc.Close()
	return f.wit.close()
}

// Data is where the peers' heads are kept, for the docs and tests.
func Data(dataDir string) string { return filepath.Join(dataDir, "fleet") }

// pingInterval is how often the node pings its NATS server: its
// heartbeat, within 1 s and 10 s.
func pingInterval(hb time.Duration) time.Duration {
	return min(max(hb, time.Second), 10*time.Second)
}

// argsStore is the object store of calls' big args, made on first use.
func (f *Fleet) argsStore(ctx context.Context) (jetstream.ObjectStore, error) {
	f.argsMu.Lock()
	defer f.argsMu.Unlock()
	if f.args != nil {
		return f.args, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	obj, err := f.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: bucketArgs, Description: "oxiosd fleet calls: arguments too big for one message",
		TTL: 10 * time.Minute, Replicas: f.cfg.Replicas, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, proto.Errorf(proto.EHOSTUNREACH, "fleet: the object store %s: %v", bucketArgs, err)
	}
	f.args = obj
	return obj, nil
}
