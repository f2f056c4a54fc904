// Package netfetch makes the HTTP requests of net.fetch under an agent's
// policy ([net]): the URL and every redirect checked against net.allow,
// every address a host resolves to checked, and the connection made to
// the very address checked, so a DNS answer that changes between check and
// use cannot slip in; the body capped and the whole fetch bounded in
// time. The kernel audits and publishes; this package fetches, and says
// how a fetch is named on the audit log (Method, Target, Outcome), what a
// failed one answers (Failure) and the record of one that went (Finish).
package netfetch

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

// Error is the error a client gets for a fetch the network failed.
func Error(err error) *proto.Error {
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

// Resolver answers the addresses of a host name.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

func SystemResolve(ctx context.Context, host string) ([]netip.Addr, error) {
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
		return proto.Errorf(proto.EINVAL, "URL %.256q names no host", strings.ToValidUTF8(u.String(), "?"))
	}
	return p.CheckHost(u.Hostname())
}

// fetcher makes the connections of one fetch. It remembers the first
// refusal, so the caller learns the rule however the HTTP client wraps
// the error.
type fetcher struct {
	p       *policy.Policy
	resolve Resolver
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
func Fetch(ctx context.Context, p *policy.Policy, a proto.FetchArgs, resolve Resolver) (proto.FetchRecord, error) {
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
