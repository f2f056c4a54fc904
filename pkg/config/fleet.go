package config

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"
	"time"
)

// Fleet is the [fleet] table: the NATS servers through which oxiosd joins
// other hosts (issue 24). With no servers the daemon is alone and nothing
// of the fleet runs.
type Fleet struct {
	// Servers are NATS URLs (nats://host:4222, tls://...); any one of a
	// cluster will do, the client learns the others.
	Servers []string `toml:"servers"`
	// Node is this daemon's name in the fleet; "" is the host name.
	Node string `toml:"node"`
	// Creds is a NATS credentials file (a user JWT and its nkey seed);
	// NKey a file holding an nkey seed alone. At most one of them.
	Creds string `toml:"creds"`
	NKey  string `toml:"nkey"`
	// TLSCert and TLSKey are a client certificate, TLSCA the roots the
	// servers' certificates are checked against.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	TLSCA   string `toml:"tls_ca"`
	// Heartbeat is how often the node writes its state and audit head;
	// a node silent for three of them is taken for gone. "" is 2s.
	Heartbeat Duration `toml:"heartbeat"`
	// Lost is how long a caller waits for a node that stopped answering
	// in the middle of a call (a partition, a NATS server stopped) before
	// it reports the call's outcome unknown; "" is 2m. A run goes on
	// meanwhile, and its records come once the node is reached again.
	Lost Duration `toml:"lost"`
	// Replicas is how many NATS servers keep each bucket and stream; 0 is
	// 3 when three or more servers are named, else 1.
	Replicas int `toml:"replicas"`
	// Peers are the other nodes this one trusts, by name, each with the
	// public nkey of its user (U...): calls and audit heads are signed
	// with the node's nkey (NKey, or the seed in Creds), and one is taken
	// only when the key of the node it names signed it.
	Peers map[string]string `toml:"peers"`
	// Admins are the peers whose admin is this node's admin too; any
	// other node's admin calls here as a user granted nothing.
	Admins []string `toml:"admins"`
	// Insecure joins without a node key: calls and heads unsigned, and
	// anyone who reaches the NATS servers may call as anyone. Never the
	// default: a fleet without a key refuses to start without it.
	Insecure bool `toml:"insecure"`
}

// On reports whether the daemon joins a fleet.
func (f Fleet) On() bool { return len(f.Servers) > 0 }

// resolveFleet checks the [fleet] table and fills its defaults.
func (c *Config) resolveFleet() error {
	f := &c.Fleet
	if len(f.Servers) == 0 {
		f.Servers = nil // "servers = []" is no servers
	}
	if len(f.Peers) == 0 {
		f.Peers = nil
	}
	if len(f.Admins) == 0 {
		f.Admins = nil
	}
	if f.Heartbeat <= 0 {
		f.Heartbeat = Duration(2 * time.Second)
	}
	if f.Lost <= 0 {
		f.Lost = Duration(2 * time.Minute)
	}
	if !f.On() {
		return nil
	}
	for _, s := range f.Servers {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || !strings.Contains("nats tls ws wss", u.Scheme) || u.Scheme == "" {
			return fmt.Errorf("config: fleet.servers: %q is not a NATS URL such as nats://host:4222", s)
		}
	}
	if f.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("config: fleet.node is not set and the host has no name: %v", err)
		}
		f.Node = h
	}
	if err := CheckNodeName(f.Node); err != nil {
		return fmt.Errorf("config: fleet.node: %v", err)
	}
	if f.Creds != "" && f.NKey != "" {
		return fmt.Errorf("config: fleet.creds and fleet.nkey: name one of them, not both")
	}
	if f.Creds == "" && f.NKey == "" && !f.Insecure {
		return fmt.Errorf("config: [fleet] has no node key: set fleet.nkey (or fleet.creds) to the node's NATS user, whose key signs its calls and audit heads, and list the other nodes' public keys in [fleet.peers] (contrib/fleet/fleet-keys makes them); insecure = true joins without, letting anyone who reaches the servers call as anyone")
	}
	for name, key := range f.Peers {
		if err := CheckNodeName(name); err != nil {
			return fmt.Errorf("config: fleet.peers: %v", err)
		}
		if !strings.HasPrefix(key, "U") || len(key) != 56 {
			return fmt.Errorf("config: fleet.peers.%s: %q is not a user's public nkey (U followed by 55 characters)", name, key)
		}
	}
	for _, a := range f.Admins {
		if _, ok := f.Peers[a]; !ok && a != f.Node {
			return fmt.Errorf("config: fleet.admins: %q is not in [fleet.peers]", a)
		}
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		return fmt.Errorf("config: fleet.tls_cert and fleet.tls_key go together")
	}
	for _, p := range []struct{ name, v string }{{"creds", f.Creds}, {"nkey", f.NKey}, {"tls_cert", f.TLSCert}, {"tls_key", f.TLSKey}, {"tls_ca", f.TLSCA}} {
		if p.v == "" {
			continue
		}
		if !path.IsAbs(p.v) {
			return fmt.Errorf("config: fleet.%s %q must be an absolute path", p.name, p.v)
		}
		if _, err := os.Stat(p.v); err != nil {
			return fmt.Errorf("config: fleet.%s: %v", p.name, err)
		}
	}
	if f.Replicas == 0 {
		f.Replicas = 1
		if len(f.Servers) >= 3 {
			f.Replicas = 3
		}
	}
	if f.Replicas < 1 || f.Replicas > 5 {
		return fmt.Errorf("config: fleet.replicas %d: want 1 to 5", f.Replicas)
	}
	return nil
}

// CheckNodeName refuses a node name that cannot be one NATS subject token.
func CheckNodeName(n string) error {
	if n == "" || len(n) > 64 {
		return fmt.Errorf("node name %q: want 1 to 64 characters", n)
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("node name %q: only letters, digits, '-' and '_'", n)
		}
	}
	return nil
}
