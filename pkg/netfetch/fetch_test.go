package netfetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

func mustPolicy(t *testing.T, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(text))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// testResolve answers from a table, and from the system for names it does
// not hold (localhost).
func testResolve(table map[string][]string) Resolver {
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		addrs, ok := table[host]
		if !ok {
			return SystemResolve(ctx, host)
		}
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

// deniedRule is the rule of a refusal, "" if err is none.
func deniedRule(err error) string {
	var d *policy.Denied
	if errors.As(err, &d) {
		return d.Rule
	}
	return ""
}

// counter is a server that counts the requests it gets: the targets
// a refused fetch must never reach.
func counter(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.WriteString(w, "secret")
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func TestFetchRefused(t *testing.T) {
	target, hits := counter(t)
	port := target.Listener.Addr().(*net.TCPAddr).Port
	p := mustPolicy(t, `[net]
allow = ["public.test", "internal.test", "mixed.test", "localhost", "2130706433", "*.example.org"]
`)
	resolve := testResolve(map[string][]string{
		"public.test":   {"93.184.216.34"},
		"internal.test": {"10.0.0.5"},
		"mixed.test":    {"93.184.216.34", "127.0.0.1"},
		"2130706433":    {"127.0.0.1"},
		"a.example.org": {"169.254.169.254"},
	})
	for _, c := range []struct{ url, rule string }{
		{fmt.Sprintf("http://127.0.0.1:%d/", port), "net.private"},
		{"http://169.254.169.254/latest/meta-data", "net.private"},
		{fmt.Sprintf("http://[::1]:%d/", port), "net.private"},
		{fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port), "net.private"},
		{fmt.Sprintf("http://0.0.0.0:%d/", port), "net.private"},
		{"http://[fe80::1]/", "net.private"},
		{"http://100.64.0.1/", "net.private"},
		{"http://[fd00::1]/", "net.private"},
		{"http://8.8.8.8/", "net.allow"}, // a public address not listed
		{fmt.Sprintf("http://localhost:%d/", port), "net.private"},
		{fmt.Sprintf("http://LOCALHOST:%d/", port), "net.private"},
		{"http://internal.test/", "net.private"},
		{fmt.Sprintf("http://mixed.test:%d/", port), "net.private"}, // every address is checked
		{fmt.Sprintf("http://2130706433:%d/", port), "net.private"}, // a name that resolves to loopback
		{"http://a.example.org/", "net.private"},
		{"http://017700000001/", "net.allow"},
		{"http://0177.0.0.1/", "net.allow"},
		{"http://0x7f.1/", "net.allow"},
		{"http://127.1/", "net.allow"},
		{"http://evil.test/", "net.allow"},
		{"http://example.org.evil.test/", "net.allow"},
		{"file:///etc/passwd", "net.scheme"},
		{"gopher://public.test/", "net.scheme"},
		{"ftp://public.test/", "net.scheme"},
		{"http://user:pw@public.test/", "net.userinfo"},
		{"http://user@public.test/", "net.userinfo"},
	} {
		_, err := Fetch(context.Background(), p, proto.FetchArgs{URL: c.url}, resolve)
		if got := deniedRule(err); got != c.rule {
			t.Errorf("%s: refused by %q, want %q (err %v)", c.url, got, c.rule, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the target got %d requests", n)
	}
	// An empty net.allow refuses everything.
	empty := mustPolicy(t, "[net]\nallow = []\n")
	for _, u := range []string{"http://public.test/", target.URL, "https://example.org/"} {
		if _, err := Fetch(context.Background(), empty, proto.FetchArgs{URL: u}, resolve); deniedRule(err) == "" {
			t.Errorf("%s with no net.allow: %v", u, err)
		}
	}
}

func TestFetchAllowed(t *testing.T) {
	var lastBody atomic.Value
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bin":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte{0, 1, 2, 0xff, 0xfe})
		case "/big":
			io.WriteString(w, strings.Repeat("x", 100))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		case "/post":
			b, _ := io.ReadAll(r.Body)
			lastBody.Store(string(b))
			fmt.Fprintf(w, "%s %s %s", r.Method, r.Header.Get("X-Test"), b)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/hop":
			http.Redirect(w, r, "/hello", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "hello")
		}
	}))
	defer s.Close()
	p := mustPolicy(t, `[net]
allow = ["127.0.0.1"]
timeout = "1s"
max_bytes = 10
`)
	ctx := context.Background()
	rec, err := Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/"}, nil)
	if err != nil || rec.Status != 200 || rec.Body != "hello" || rec.Bytes != 5 || rec.Encoding != "" || rec.ContentType != "text/plain" || len(rec.Digest) != 64 || rec.Method != "GET" {
		t.Fatalf("allowed fetch: %+v, %v", rec, err)
	}
	rec, err = Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/bin"}, nil)
	if err != nil || rec.Encoding != proto.EncodingBase64 || rec.Body != "AAEC//4=" {
		t.Errorf("binary body: %+v, %v", rec, err)
	}
	rec, err = Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/big"}, nil)
	if err != nil || !rec.Truncated || rec.Bytes != 10 || rec.Body != "xxxxxxxxxx" {
		t.Errorf("capped body: %+v, %v", rec, err)
	}
	rec, err = Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/hop"}, nil)
	if err != nil || rec.Body != "hello" || rec.FinalURL != s.URL+"/hello" {
		t.Errorf("redirect: %+v, %v", rec, err)
	}
	rec, err = Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/post", Method: "post", Body: "b=1", Headers: map[string]string{"X-Test": "y"}}, nil)
	if err != nil || rec.Body != "POST y b=1" {
		t.Errorf("post: %+v, %v", rec, err)
	}
	rec, err = Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/", Method: "HEAD"}, nil)
	if err != nil || rec.Status != 200 || rec.Body != "" {
		t.Errorf("head: %+v, %v", rec, err)
	}
	if _, err := Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/loop"}, nil); !errors.Is(err, errRedirects) || Error(err).Code != proto.ELOOP {
		t.Errorf("redirect loop: %v", err)
	}
	start := time.Now()
	_, err = Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/slow"}, nil)
	if err == nil || Error(err).Code != proto.ETIMEDOUT || time.Since(start) > 1900*time.Millisecond {
		t.Errorf("slow: %v after %s", err, time.Since(start))
	}
	// A request's timeout only shortens the policy's.
	start = time.Now()
	_, err = Fetch(ctx, p, proto.FetchArgs{URL: s.URL + "/slow", Timeout: "100ms"}, nil)
	if err == nil || Error(err).Code != proto.ETIMEDOUT || time.Since(start) > 900*time.Millisecond {
		t.Errorf("slow with 100ms: %v after %s", err, time.Since(start))
	}
	for _, a := range []proto.FetchArgs{
		{URL: s.URL, Method: "DELETE"},
		{URL: s.URL, Body: "x"},
		{URL: s.URL, Timeout: "soon"},
		{URL: s.URL, Headers: map[string]string{"X-A": "1\r\nX-B: 2"}},
		{URL: s.URL, Headers: map[string]string{"Bad Name": "1"}},
		{URL: s.URL, Headers: map[string]string{"Host": "example.org"}},
		{URL: "http://[::1"},
		{URL: "http:///path"},
		{URL: "http://%31%32%37.0.0.1/"},
	} {
		_, err := Fetch(ctx, p, a, nil)
		var pe *proto.Error
		if !errors.As(err, &pe) || pe.Code != proto.EINVAL {
			t.Errorf("%+v: %v, want EINVAL", a, err)
		}
	}
	if v, _ := lastBody.Load().(string); v != "b=1" {
		t.Errorf("posted %q", v)
	}
	// Nothing listens: refused by the network, not the policy.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	if _, err := Fetch(ctx, p, proto.FetchArgs{URL: "http://" + addr + "/"}, nil); deniedRule(err) != "" || Error(err).Code != proto.ECONNREFUSED {
		t.Errorf("closed port: %v", err)
	}
}

// TestFetchRedirectRefused: an allowed host that redirects to loopback,
// the metadata address, an unlisted name or another scheme gets no
// further.
func TestFetchRedirectRefused(t *testing.T) {
	target, hits := counter(t)
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	}))
	s.Listener.Close()
	s.Listener = l
	s.Start()
	defer s.Close()
	p := mustPolicy(t, `[net]
allow = ["127.0.0.2", "public.test"]
`)
	resolve := testResolve(map[string][]string{"public.test": {"93.184.216.34"}, "rebind.test": {"127.0.0.1"}})
	for _, c := range []struct{ to, rule string }{
		{target.URL + "/", "net.private"},
		{"http://169.254.169.254/latest/meta-data", "net.private"},
		{strings.Replace(target.URL, "127.0.0.1", "localhost", 1), "net.allow"},
		{strings.Replace(target.URL, "127.0.0.1", "[::1]", 1), "net.private"},
		{strings.Replace(target.URL, "127.0.0.1", "rebind.test", 1), "net.allow"},
		{"file:///etc/passwd", "net.scheme"},
		{"http://u:p@public.test/", "net.userinfo"},
	} {
		_, err := Fetch(context.Background(), p, proto.FetchArgs{URL: s.URL + "/?to=" + c.to}, resolve)
		if got := deniedRule(err); got != c.rule {
			t.Errorf("redirect to %s: refused by %q, want %q (err %v)", c.to, got, c.rule, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the target got %d requests", n)
	}
}

// TestFetchRebind: the connection goes to the address that was checked,
// whatever the Resolver says afterwards.
func TestFetchRebind(t *testing.T) {
	target, hits := counter(t)
	port := target.Listener.Addr().(*net.TCPAddr).Port
	p := mustPolicy(t, "[net]\nallow = [\"flip.test\"]\n")
	var calls atomic.Int64
	resolve := func(ctx context.Context, host string) ([]netip.Addr, error) {
		if calls.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil // TEST-NET-1: public, unroutable
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	_, err := Fetch(context.Background(), p, proto.FetchArgs{URL: fmt.Sprintf("http://flip.test:%d/", port), Timeout: "300ms"}, resolve)
	if err == nil || hits.Load() != 0 {
		t.Errorf("rebinding reached the target: %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("resolved %d times, want once", calls.Load())
	}
}
