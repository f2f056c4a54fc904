package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/oxios/oxios/pkg/proto"
)

// fetch is the fetch tool: one net.fetch of the run's agent. The model
// gets the status line, the content type and the body (clipped); a
// policy refusal comes back as the kernel's error, like exec's.
func (r *Runner) fetch(ctx context.Context, url, method string) (out, summary string, err error) {
	if strings.TrimSpace(url) == "" {
		return "", "", toolErrorf("fetch: give a url")
	}
	switch m := strings.ToUpper(method); m {
	case "", proto.MethodGet, proto.MethodHead:
		method = m
	default:
		return "", "", toolErrorf("fetch: method %q: want GET or HEAD", method)
	}
	rec, err := r.k.Fetch(ctx, proto.FetchArgs{URL: url, Method: method})
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "status %d", rec.Status)
	if rec.FinalURL != "" && rec.FinalURL != url {
		fmt.Fprintf(&b, " from %s", rec.FinalURL)
	}
	if rec.ContentType != "" {
		fmt.Fprintf(&b, "\ncontent-type: %s", rec.ContentType)
	}
	switch {
	case rec.Encoding != "":
		fmt.Fprintf(&b, "\n(%d bytes of binary data)", rec.Bytes)
	case rec.Body != "":
		b.WriteString("\n\n" + rec.Body)
	}
	if rec.Truncated {
		b.WriteString("\n(body truncated by the policy's net.max_bytes)")
	}
	return clip(b.String()), "", nil
}
