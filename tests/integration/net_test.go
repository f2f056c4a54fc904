package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
)

// The fetch syscall (net.fetch) and the runner's fetch tool, under the
// policy's [net] (issue 7).

// presetPolicy gives agent the policy text before oxiosd first starts on
// dir, as if an operator had set it (there is no ox-policy yet).
func presetPolicy(t *testing.T, dir, agent, text string) {
	t.Helper()
	p := filepath.Join(dir, "data", "repo", "agents", agent, "sys", "policy.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fetchTarget is a server that counts its requests: what refused fetches
// must never reach. /to?u=URL redirects to URL.
func fetchTarget(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path == "/to" {
			http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from the web")
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func errCode(err error) string {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return fmt.Sprint(err)
}

// TestFetchDefaultPolicy: the default policy lists no host, so every fetch
// is refused and audited with the rule, and nothing is reached.
func TestFetchDefaultPolicy(t *testing.T) {
	t.Parallel()
	srv, hits := fetchTarget(t)
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ctx := context.Background()
	createAgent(t, d, "ops") // a fetch does not create one
	for _, u := range []string{
		srv.URL + "/", "http://127.0.0.1/", "http://169.254.169.254/latest/meta-data", "http://[::1]/",
		"http://localhost/", "http://0.0.0.0/", "http://2130706433/", "http://0177.0.0.1/",
		"file:///etc/passwd", "gopher://example.org/", "http://user:pw@example.org/", "https://example.org/",
	} {
		_, err := c.NetFetch(ctx, proto.FetchArgs{Agent: "ops", URL: u})
		if errCode(err) != proto.EPERM {
			t.Errorf("%s: %v, want EPERM", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
	au := d.ox("", "ox-audit", "log", "--op", "net.fetch")
	for _, want := range []string{
		`ops:fetch http://169.254.169.254/latest/meta-data [net.private]`,
		`ops:fetch https://example.org/ [net.allow]`,
		`ops:fetch file:///etc/passwd [net.scheme]`,
		`ops:fetch http://user:pw@example.org/ [net.userinfo]`,
	} {
		if !strings.Contains(au.stdout, want) {
			t.Errorf("audit log lacks %q:\n%s", want, au.stdout)
		}
	}
	if strings.Count(au.stdout, `"EPERM"`) != 12 {
		t.Errorf("want 12 refusals audited:\n%s", au.stdout)
	}
	if v := d.ox("", "ox-audit", "verify"); v.code != 0 {
		t.Errorf("ox-audit verify: %d %s", v.code, v.stderr)
	}
}

// TestFetchAllowedAddress: an agent whose policy lists 127.0.0.1 fetches
// from it, through the kernel and through the runner's fetch tool; a
// redirect to the metadata address or to localhost by name is still
// refused.
func TestFetchAllowedAddress(t *testing.T) {
	t.Parallel()
	srv, hits := fetchTarget(t)
	dir := shortTempDir(t)
	presetPolicy(t, dir, "web", "[net]\nallow = [\"127.0.0.1\"]\ntimeout = \"5s\"\nmax_bytes = \"1KiB\"\n")
	s := llmtest.New(
		llmtest.Turn{ToolCalls: []llmtest.Call{
			call("fetch", fmt.Sprintf(`{"url":%q}`, srv.URL+"/page")),
			call("fetch", `{"url":"http://169.254.169.254/latest/meta-data"}`),
		}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("finish", `{"summary":"fetched"}`)}},
	)
	t.Cleanup(s.Close)
	cfg := fmt.Sprintf("[llm]\nbase_url = %q\nmodel = \"test-model\"\ntimeout = \"5s\"\n", s.URL)
	d := startDaemon(t, daemonOpts{dir: dir, config: cfg})
	c := d.client(t)
	ctx := context.Background()

	rec, err := c.NetFetch(ctx, proto.FetchArgs{Agent: "web", URL: srv.URL + "/"})
	if err != nil || rec.Type != "fetch" || rec.Agent != "web" || rec.Status != 200 || rec.Body != "hello from the web" ||
		rec.Bytes != 18 || rec.ContentType != "text/plain" || len(rec.Digest) != 64 || !strings.Contains(rec.Text, "status 200") {
		t.Fatalf("allowed fetch: %+v, %v", rec, err)
	}
	before := hits.Load()
	for _, u := range []string{
		srv.URL + "/to?u=http://169.254.169.254/latest/meta-data",
		srv.URL + "/to?u=" + strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/",
		srv.URL + "/to?u=file:///etc/passwd",
	} {
		if _, err := c.NetFetch(ctx, proto.FetchArgs{Agent: "web", URL: u}); errCode(err) != proto.EPERM {
			t.Errorf("%s: %v, want EPERM", u, err)
		}
	}
	if n := hits.Load() - before; n != 3 {
		t.Errorf("the redirects got %d requests, want only the 3 first hops", n)
	}
	// Another agent (the default policy) may not.
	createAgent(t, d, "ops")
	if _, err := c.NetFetch(ctx, proto.FetchArgs{Agent: "ops", URL: srv.URL + "/"}); errCode(err) != proto.EPERM {
		t.Errorf("ops: %v, want EPERM", err)
	}

	r := d.ox("", "ox-spawn", "-a", "web", "--json", "fetch the page")
	if r.code != 0 {
		t.Fatalf("ox-spawn: %d %s %s", r.code, r.stdout, r.stderr)
	}
	fr := toolResults(records(t, r.stdout), "fetch")
	if len(fr) != 2 || fr[0]["error"] != nil || !strings.Contains(fr[0]["text"].(string), "status 200") ||
		!strings.Contains(fr[0]["text"].(string), "hello from the web") || fr[1]["code"] != "EPERM" {
		t.Fatalf("fetch tool results %v", fr)
	}
	au := d.ox("", "ox-audit", "log", "--op", "net.fetch")
	for _, want := range []string{
		fmt.Sprintf(`web:fetch %s/ => status 200 bytes 18 body `, srv.URL),
		fmt.Sprintf(`web:fetch %s/page => status 200 bytes 18 body `, srv.URL),
		`web:fetch http://169.254.169.254/latest/meta-data [net.private]`,
		fmt.Sprintf(`web:fetch %s/to?u=http://169.254.169.254/latest/meta-data [net.private]`, srv.URL),
		fmt.Sprintf(`web:fetch %s/to?u=file:///etc/passwd [net.scheme]`, srv.URL),
	} {
		if !strings.Contains(au.stdout, want) {
			t.Errorf("audit log lacks %q:\n%s", want, au.stdout)
		}
	}
}
