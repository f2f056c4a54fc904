package proto

import (
	"strings"
	"testing"
)

func TestMCPResultArgs(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	for _, c := range []struct {
		a      MCPResultArgs
		result string
		err    string
	}{
		{MCPResultArgs{Tool: "t", Call: 3, Digest: digest}, "ok", ""},
		{MCPResultArgs{Tool: "t", Call: 3, Digest: digest, Error: "EPIPE"}, "EPIPE", ""},
		{MCPResultArgs{Tool: "t", Call: 3, Digest: digest, Error: ETIMEDOUT}, ETIMEDOUT, ""},
		{MCPResultArgs{Tool: "t", Digest: digest}, "", "names the tool and the call"},
		{MCPResultArgs{Tool: "t", Call: 3, Digest: "AB"}, "", "want the hex BLAKE3-256"},
		{MCPResultArgs{Tool: "t", Call: 3, Digest: digest, Error: "ENOENT"}, "", "want ETIMEDOUT, EPIPE, EIO, EPROTO or ECANCELED"},
	} {
		result, err := c.a.Result()
		if result != c.result || (c.err == "") != (err == nil) || (err != nil && (err.Code != EINVAL || !strings.Contains(err.Message, c.err))) {
			t.Errorf("%+v: %q %v", c.a, result, err)
		}
	}
}
