package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// cannedDaemon answers every request with the same state record, under
// the request's id, allocating nothing per request: what a test counts
// is then the client's.
func cannedDaemon(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "canned.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hello, _ := json.Marshal(proto.Reply{OK: true, Hello: &proto.Hello{Proto: proto.Version, Server: "canned"}})
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				nc.Write(append(hello, '\n'))
				r := bufio.NewReader(nc)
				var out []byte
				for {
					line, err := r.ReadSlice('\n')
					if err != nil {
						return
					}
					id := line[bytes.IndexByte(line, ':')+1 : bytes.IndexByte(line, ',')]
					n, _ := strconv.ParseUint(string(id), 10, 64)
					out = strconv.AppendUint(append(out[:0], `{"id":`...), n, 10)
					out = append(out, `,"ok":true,"result":{"type":"state","agent":"a","key":"k","size":5,"modified":"2026-11-26T00:00:00Z","value":"hello"}}`+"\n"...)
					if _, err := nc.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return sock
}

// A load through the client allocates its value and the strings of its
// record, nothing per call besides: no boxing of its arguments (a
// refactor that let them escape cost every call one more allocation).
func TestStateLoadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are not counted under the race detector (sync.Pool drops items at random)")
	}
	c, err := Dial(context.Background(), cannedDaemon(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	n := testing.AllocsPerRun(2000, func() {
		if v, _, err := c.StateLoad(ctx, "a", "k"); err != nil || string(v) != "hello" {
			t.Fatalf("%q %v", v, err)
		}
	})
	t.Logf("%.1f allocations a load", n)
	if n > 3 {
		t.Fatalf("a load allocates %.1f times, want at most 3", n)
	}
	p := c.Pipeline()
	ps := make([]*Pending, 16)
	n = testing.AllocsPerRun(200, func() {
		for i := range ps {
			ps[i] = p.StateLoad("a", "k")
		}
		p.Send()
		for _, pd := range ps {
			if v, _, err := pd.Value(ctx); err != nil || string(v) != "hello" {
				t.Fatalf("%q %v", v, err)
			}
		}
	}) / float64(len(ps))
	t.Logf("%.1f allocations a pipelined load", n)
	if n > 4 {
		t.Fatalf("a pipelined load allocates %.1f times, want at most 4", n)
	}
}
