package kernel

import (
	"context"
	"net/url"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/netfetch"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// NetFetch makes an HTTP request for a.Agent under its policy's [net]:
// the URL must be http or https without user info, its host (and the
// host of every redirect) on net.allow, and every address the host
// resolves to allowed (private, loopback and link-local ones only when
// listed); the connection goes to the very address checked, so a DNS
// answer that changes between check and use cannot slip in. The body is
// capped at net.max_bytes and the whole fetch bounded by net.timeout.
// Each fetch is audited with its URL, status, size and body digest; each
// refusal with the rule that refused it.
func (k *Kernel) NetFetch(ctx context.Context, c *Cred, a proto.FetchArgs, raw []byte) (proto.FetchRecord, error) {
	return sysNetFetch.Call(k, ctx, c, a, raw)
}

func (k *Kernel) netFetch(ctx context.Context, c *Cred, a proto.FetchArgs, raw []byte) (proto.FetchRecord, error) {
	method := netfetch.Method(a.Method)
	deny := func(err *proto.Error, target string) (proto.FetchRecord, error) {
		k.auditDenied(c, proto.OpNetFetch, target, raw, err.Code)
		return proto.FetchRecord{}, err
	}
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.FetchRecord{}, err
	}
	if u, uerr := url.Parse(a.URL); uerr == nil && u.Hostname() != "" {
		if ask := policy.AsAsked(p.CheckHostAsk(u.Hostname())); ask != nil {
			if perr := k.ask(ctx, c, a.Agent, proto.OpNetFetch, method+" "+a.URL, p, ask); perr != nil {
				return deny(perr, netfetch.Target(a.Agent, method, a.URL, " ["+ask.Rule+"]"))
			}
			// Approved: this fetch runs as if the ask rules allowed.
			p = p.Granting()
		}
	}
	// The hook of the fetch's host, once the rules allow it (a host they
	// refuse, Fetch refuses, as it does an address).
	if u, uerr := url.Parse(a.URL); uerr == nil && u.Hostname() != "" && answer(p, asking{ask: askHost, key: u.Hostname()}) == nil {
		if d := policy.AsDenied(k.hook(ctx, p, c, proto.OpNetFetch, a.Agent, asking{ask: askHost, key: u.Hostname()}, false)); d != nil {
			return deny(d.Refused("fetch "+a.URL), netfetch.Target(a.Agent, method, a.URL, " ["+d.Rule+"]"))
		}
	}
	rec, ferr := netfetch.Fetch(ctx, p, a, netfetch.SystemResolve)
	if ferr != nil {
		pe, outcome := netfetch.Failure(ferr)
		if outcome == "" {
			return proto.FetchRecord{}, pe
		}
		return deny(pe, netfetch.Target(a.Agent, method, a.URL, outcome))
	}
	// Subscribers get the record without the body.
	ev, tgt := netfetch.Finish(&rec, a.Agent, c.Run, method, a.URL)
	t := &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpNetFetch, Target: tgt, Args: audit.ArgsDigest(raw), Result: "ok"}, data: &ev}
	if err := k.submit(ctx, t, true); err != nil {
		return proto.FetchRecord{}, err
	}
	return rec, nil
}
