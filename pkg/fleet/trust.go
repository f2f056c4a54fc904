package fleet

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/oxios/oxios/pkg/config"
)

// Trust between nodes (issue 44). A message a node acts on (a call, an
// audit head, its hash of an old entry) names the node that sent it; the
// identity a call carries (uid, agent, admin) is what that node vouches
// for. Neither is worth anything unless the node's own key signed it: a
// node signs with the ed25519 key of its NATS user (an nkey, which NATS
// itself authenticates it with), and its peers verify with the public key
// [fleet.peers] lists for that name. NATS gives no sender identity to a
// subscriber; the signature is it.
//
// A call also names the node it is for and carries an expiry, and a node
// acts on a call id once: a call seen on the wire and sent again, as it
// was or changed, is refused (changed, its signature fails; as it was,
// its id was seen or it has expired).
//
// What a caller is here follows from who signed: a run of an agent stays
// that agent's run; a node's admin is this node's admin only when
// [fleet] admins lists that node; otherwise it is a user granted nothing.

// callTTL is how long a signed call may be acted on after it was made.
const callTTL = 30 * time.Second

// signed is a message with the signature of the node it names.
type signed struct {
	Body json.RawMessage `json:"body"`
	Sig  string          `json:"sig"`
}

// trust is this node's key and what it trusts of others.
type trust struct {
	self     string
	kp       nkeys.KeyPair // nil: insecure
	pub      string
	peers    map[string]string
	admins   map[string]bool
	insecure bool

	// since is when this node started: the ids it saw before are lost
	// with a restart, so a call made before it is refused whole.
	since time.Time

	mu   sync.Mutex
	seen map[string]time.Time // call id -> when it expires
}

// errUntrusted is a message no trusted node signed.
var errUntrusted = errors.New("not signed by a trusted node")

func newTrust(cfg config.Fleet) (*trust, error) {
	t := &trust{self: cfg.Node, peers: cfg.Peers, admins: map[string]bool{}, insecure: cfg.Insecure, seen: map[string]time.Time{}, since: time.Now()}
	for _, a := range cfg.Admins {
		t.admins[a] = true
	}
	var seed []byte
	switch {
	case cfg.NKey != "":
		b, err := os.ReadFile(cfg.NKey)
		if err != nil {
			return nil, fmt.Errorf("fleet.nkey: %v", err)
		}
		seed = b
	case cfg.Creds != "":
		b, err := os.ReadFile(cfg.Creds)
		if err != nil {
			return nil, fmt.Errorf("fleet.creds: %v", err)
		}
		seed = b
	}
	if seed != nil {
		kp, err := nkeys.ParseDecoratedNKey(seed)
		if err != nil {
			return nil, fmt.Errorf("fleet: the node's key: %v", err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("fleet: the node's key: %v", err)
		}
		t.kp, t.pub = kp, pub
	}
	if t.kp == nil && !t.insecure {
		return nil, errors.New("fleet: no node key, and insecure is not set")
	}
	return t, nil
}

// seal signs body as this node's (insecure: body as it is).
func (t *trust) seal(body []byte) []byte {
	if t.kp == nil {
		return body
	}
	sig, err := t.kp.Sign(body)
	if err != nil {
		return body
	}
	b, _ := json.Marshal(signed{Body: body, Sig: base64.RawStdEncoding.EncodeToString(sig)})
	return b
}

// open returns the body of data if node's key signed it. An unsigned
// message is taken only by an insecure node.
func (t *trust) open(data []byte, node string) ([]byte, error) {
	var s signed
	if json.Unmarshal(data, &s) != nil || s.Sig == "" || len(s.Body) == 0 {
		if t.insecure {
			return data, nil
		}
		return nil, fmt.Errorf("an unsigned message naming node %q: %w", node, errUntrusted)
	}
	key := t.peers[node]
	if node == t.self {
		key = t.pub
	}
	if key == "" {
		return nil, fmt.Errorf("node %q is not in [fleet.peers]: %w", node, errUntrusted)
	}
	sig, err := base64.RawStdEncoding.DecodeString(s.Sig)
	if err != nil {
		return nil, fmt.Errorf("a signature that does not decode, naming node %q: %w", node, errUntrusted)
	}
	pk, err := nkeys.FromPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("node %q's key in [fleet.peers]: %v", node, err)
	}
	if err := pk.Verify(s.Body, sig); err != nil {
		return nil, fmt.Errorf("a message naming node %q that its key did not sign (forged, or changed on the way): %w", node, errUntrusted)
	}
	return s.Body, nil
}

// fresh checks a call's addressee, expiry and id: for this node, not
// expired, not seen before; and remembers the id until it expires.
func (t *trust) fresh(to, id string, expires int64) error {
	now := time.Now()
	if t.insecure && to == "" {
		return nil
	}
	if to != t.self {
		return fmt.Errorf("a call for node %q sent to %q: %w", to, t.self, errUntrusted)
	}
	exp := time.UnixMilli(expires)
	if now.After(exp) || exp.Sub(now) > 2*callTTL {
		return fmt.Errorf("a call whose expiry (%s) is past or too far: %w", exp.UTC().Format(time.RFC3339), errUntrusted)
	}
	if made := exp.Add(-callTTL); made.Before(t.since) {
		// Seen or not before the restart, this node cannot tell: a
		// caller that meant it makes a new call.
		return fmt.Errorf("a call made at %s, before this node started (%s): %w", made.UTC().Format(time.RFC3339Nano), t.since.UTC().Format(time.RFC3339Nano), errUntrusted)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.seen {
		if now.After(e) {
			delete(t.seen, k)
		}
	}
	if _, dup := t.seen[id]; dup {
		return fmt.Errorf("call %s was seen before (sent again): %w", id, errUntrusted)
	}
	t.seen[id] = exp
	return nil
}

// admin reports whether node's admin is this node's admin.
func (t *trust) admin(node string) bool {
	return node == t.self || t.admins[node] || (t.insecure && t.kp == nil)
}

// known reports whether node may be called: this node, a peer, or any
// node an insecure fleet lists.
func (t *trust) known(node string) bool {
	if node == t.self || t.insecure {
		return true
	}
	_, ok := t.peers[node]
	return ok
}

// names is the nodes a secure fleet knows, sorted.
func (t *trust) names() []string {
	out := []string{t.self}
	for n := range t.peers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
