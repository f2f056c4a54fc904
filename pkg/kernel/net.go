package kernel

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Defaults of a fetch when the policy's [net] leaves them at 0.
const (
	defaultFetchTimeout = 30 * time.Second
	defaultFetchBytes   = 1 << 20
	maxRedirects        = 5
	// maxFetchHeaders bounds the response headers a fetch reads.
	maxFetchHeaders = 64 << 10
)

// fetchTarget is the target of a fetch's audit entry: the agent, the URL
// (and the method unless GET), and what came of it.
func fetchTarget(agent, method, rawURL, outcome string) string {
	what := clipTarget(rawURL, maxTarget)
	if method != "" && method != proto.MethodGet {
		what = method + " " + what
	}
	return agent + ":fetch " + what + outcome
}

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
	method := strings.ToUpper(a.Method)
	if method == "" {
		method = proto.MethodGet
	}
	deny := func(err *proto.Error, target string) (proto.FetchRecord, error) {
		k.auditDenied(c, proto.OpNetFetch, target, raw, err.Code)
		return proto.FetchRecord{}, err
	}
	if err := k.gate(&call{op: proto.OpNetFetch, c: c, agent: a.Agent, raw: raw, target: fetchTarget(a.Agent, method, a.URL, "")}); err != nil {
		return proto.FetchRecord{}, err
	}
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.FetchRecord{}, err
	}
	if u, uerr := url.Parse(a.URL); uerr == nil && u.Hostname() != "" {
		if ask := policy.AsAsked(p.CheckHostAsk(u.Hostname())); ask != nil {
			if perr := k.ask(ctx, c, a.Agent, proto.OpNetFetch, method+" "+a.URL, p, ask); perr != nil {
				return deny(perr, fetchTarget(a.Agent, method, a.URL, " ["+ask.Rule+"]"))
			}
			// Approved: this fetch runs as if the ask rules allowed.
			p = p.Granting()
		}
	}
	rec, ferr := fetch(ctx, p, a, systemResolve)
	if ferr != nil {
		var d *policy.Denied
		if errors.As(ferr, &d) {
			return deny(proto.Errorf(proto.EPERM, "fetch refused: %s (policy rule %s)", d.Reason, d.Rule), fetchTarget(a.Agent, method, a.URL, " ["+d.Rule+"]"))
		}
		var pe *proto.Error
		if errors.As(ferr, &pe) && pe.Code == proto.EINVAL {
			return proto.FetchRecord{}, pe
		}
		pe = fetchError(ferr)
		return deny(pe, fetchTarget(a.Agent, method, a.URL, " => "+pe.Code))
	}
	rec.Type, rec.Agent, rec.Run = proto.RecordFetch, a.Agent, c.Run
	outcome := fmt.Sprintf(" => status %d bytes %d", rec.Status, rec.Bytes)
	if rec.Truncated {
		outcome += " (truncated)"
	}
	if rec.FinalURL != rec.URL {
		outcome += " from " + clipTarget(rec.FinalURL, maxTarget)
	}
	rec.Text = strings.TrimPrefix(fetchTarget("", method, a.URL, outcome), ":fetch ")
	// Subscribers get the record without the body.
	ev := rec
	ev.Body, ev.Encoding = "", ""
	t := &tx{entry: &audit.Entry{Actor: actor(c), Op: proto.OpNetFetch, Target: fetchTarget(a.Agent, method, a.URL, outcome+" body "+rec.Digest[:16]), Args: audit.ArgsDigest(raw), Result: "ok"}, data: &ev}
	if err := k.submit(ctx, t, true); err != nil {
		return proto.FetchRecord{}, err
	}
	return rec, nil
}

// fetchError is the error a client gets for a fetch the network failed.
func fetchError(err error) *proto.Error {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return proto.Errorf(proto.ETIMEDOUT, "fetch timed out: %v", err)
	case errors.Is(err, context.Canceled):
		return proto.Errorf(proto.ECANCELED, "fetch canceled: %v", err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return proto.Errorf(proto.ECONNREFUSED, "fetch: %v", err)
	case errors.Is(err, errRedirects):
		return proto.Errorf(proto.ELOOP, "fetch: %v", err)
	}
	return proto.Errorf(proto.EHOSTUNREACH, "fetch: %v", err)
}

var errRedirects = fmt.Errorf("more than %d redirects", maxRedirects)

// resolver answers the addresses of a host name.
type resolver func(ctx context.Context, host string) ([]netip.Addr, error)

func systemResolve(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// checkURL refuses what no policy allows (schemes other than http and
// https, user info) and hosts the policy does not list.
func checkURL(p *policy.Policy, u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return &policy.Denied{Rule: "net.scheme", Reason: fmt.Sprintf("URL scheme %q: a fetch goes to http or https only", u.Scheme)}
	}
	if u.User != nil {
		return &policy.Denied{Rule: "net.userinfo", Reason: "a fetch's URL may not carry a user name or password"}
	}
	if u.Hostname() == "" {
		return proto.Errorf(proto.EINVAL, "URL %q names no host", clipTarget(u.String(), maxTarget))
	}
	return p.CheckHost(u.Hostname())
}

// fetcher makes the connections of one fetch. It remembers the first
// refusal, so the caller learns the rule however the HTTP client wraps
// the error.
type fetcher struct {
	p       *policy.Policy
	resolve resolver
	mu      sync.Mutex
	denied  error
}

func (f *fetcher) note(err error) error {
	var d *policy.Denied
	if errors.As(err, &d) {
		f.mu.Lock()
		if f.denied == nil {
			f.denied = d
		}
		f.mu.Unlock()
	}
	return err
}

// dial connects to addr ("host:port") only at addresses the policy
// allows: the host is checked, resolved, every address checked, and the
// connection made to a checked address, never to the name again.
func (f *fetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %v", portStr, err)
	}
	if err := f.p.CheckHost(host); err != nil {
		return nil, f.note(err)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = f.resolve(ctx, host); err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("host %q has no address", host)
	}
	for _, ip := range ips {
		if err := f.p.CheckAddr(host, ip); err != nil {
			return nil, f.note(err)
		}
	}
	// The Control check sees the address the socket is about to connect
	// to: nothing but a checked address gets that far.
	d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		return f.note(f.p.CheckAddr(host, ap.Addr()))
	}}
	var first error
	for _, ip := range ips {
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// redirect checks every redirect's URL as the first one was.
func (f *fetcher) redirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return errRedirects
	}
	return f.note(checkURL(f.p, req.URL))
}

// fetch makes a's request under p, resolving names with resolve. It
// returns a *policy.Denied (maybe wrapped) for a refusal, an EINVAL
// *proto.Error for bad arguments, and the network's error otherwise. The
// record's Type, Agent, Run and Text are the caller's to fill.
func fetch(ctx context.Context, p *policy.Policy, a proto.FetchArgs, resolve resolver) (proto.FetchRecord, error) {
	method := strings.ToUpper(a.Method)
	switch method {
	case "":
		method = proto.MethodGet
	case proto.MethodGet, proto.MethodHead, proto.MethodPost:
	default:
		return proto.FetchRecord{}, proto.Errorf(proto.EINVAL, "method %q: want GET, HEAD or POST", a.Method)
	}
	if a.Body != "" && method != proto.MethodPost {
		return proto.FetchRecord{}, proto.Errorf(proto.EINVAL, "a body goes with POST only")
	}
	timeout := p.Net.Timeout.D()
	if timeout <= 0 {
		timeout = defaultFetchTimeout
	}
	if a.Timeout != "" {
		t, err := time.ParseDuration(a.Timeout)
		if err != nil || t <= 0 {
			return proto.FetchRecord{}, proto.Errorf(proto.EINVAL, "timeout %q: want a duration such as 10s", a.Timeout)
		}
		timeout = min(timeout, t)
	}
	maxBytes := int64(p.Net.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = defaultFetchBytes
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return proto.FetchRecord{}, proto.Errorf(proto.EINVAL, "URL: %v", err)
	}
	if err := checkURL(p, u); err != nil {
		return proto.FetchRecord{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if method == proto.MethodPost {
		body = strings.NewReader(a.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return proto.FetchRecord{}, proto.Errorf(proto.EINVAL, "request: %v", err)
	}
	req.Header.Set("User-Agent", "oxios-fetch/1")
	for name, v := range a.Headers {
		if !validHeader(name, v) {
			return proto.FetchRecord{}, proto.Errorf(proto.EINVAL, "header %q: want a token name and a value without control characters", name)
		}
		if strings.EqualFold(name, "Host") {
			return proto.FetchRecord{}, proto.Errorf(proto.EINVAL, "header Host: the URL names the host")
		}
		req.Header.Set(name, v)
	}
	f := &fetcher{p: p, resolve: resolve}
	tr := &http.Transport{
		Proxy:                  nil, // never from the environment
		DialContext:            f.dial,
		DisableKeepAlives:      true,
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: maxFetchHeaders,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, CheckRedirect: f.redirect}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		f.mu.Lock()
		denied := f.denied
		f.mu.Unlock()
		if denied != nil {
			return proto.FetchRecord{}, denied
		}
		return proto.FetchRecord{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return proto.FetchRecord{}, err
	}
	truncated := int64(len(b)) > maxBytes
	if truncated {
		b = b[:maxBytes]
	}
	sum := blake3.Sum256(b)
	rec := proto.FetchRecord{
		Method: method, URL: a.URL, FinalURL: resp.Request.URL.String(), Status: resp.StatusCode,
		ContentType: resp.Header.Get("Content-Type"), Truncated: truncated, Bytes: int64(len(b)),
		Digest: hex.EncodeToString(sum[:]), Duration: time.Since(start).Seconds(),
	}
	rec.Body, rec.Encoding = proto.EncodeValue(b)
	return rec, nil
}

// validHeader: a token name, and a value without control characters
// (other than tab), so that no header smuggles another.
func validHeader(name, v string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
