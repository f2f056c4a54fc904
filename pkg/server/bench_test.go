package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/server"
)

// benchServer is a kernel and its server on a temp dir, and a client.
func benchServer(b *testing.B) *client.Client {
	c, _ := benchServerAt(b)
	return c
}

// benchServerAt is benchServer, and the server's socket.
func benchServerAt(b *testing.B) (*client.Client, string) {
	dir := b.TempDir()
	cfg := config.Default()
	cfg.Data = filepath.Join(dir, "data")
	cfg.Socket = filepath.Join(dir, "s.sock")
	cfg.NoMount = true
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k, err := kernel.New(cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		b.Fatal(err)
	}
	srv := newServer(k, log)
	go srv.Serve(ln)
	b.Cleanup(func() {
		srv.Shutdown(context.Background())
		k.Close()
	})
	c, err := client.Dial(context.Background(), cfg.Socket)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, cfg.Socket
}

func newServer(k *kernel.Kernel, log *slog.Logger) *server.Server {
	return server.New(context.Background(), k, log)
}

// BenchmarkStateLoad: one state.load round trip over the socket.
func BenchmarkStateLoad(b *testing.B) {
	c := benchServer(b)
	ctx := context.Background()
	if _, err := c.StateSave(ctx, "bench", "v100", []byte(strings.Repeat("x", 100))); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, err := c.StateLoad(ctx, "bench", "v100"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateSave: one durable state.save round trip.
func BenchmarkStateSave(b *testing.B) {
	c := benchServer(b)
	ctx := context.Background()
	v := []byte(strings.Repeat("x", 100))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.StateSave(ctx, "bench", "k", v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateLoadPipelined: 16 callers sharing one client, so their
// requests are pipelined on the connection.
func BenchmarkStateLoadPipelined(b *testing.B) {
	c := benchServer(b)
	ctx := context.Background()
	if _, err := c.StateSave(ctx, "bench", "v100", []byte(strings.Repeat("x", 100))); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(8) // 16 callers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := c.StateLoad(ctx, "bench", "v100"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStateLoadRawPipeline: a raw client writing 16 loads at once and
// reading their 16 replies: the server's own cost per pipelined request.
func BenchmarkStateLoadRawPipeline(b *testing.B) {
	c, sock := benchServerAt(b)
	ctx := context.Background()
	if _, err := c.StateSave(ctx, "bench", "v100", []byte(strings.Repeat("x", 100))); err != nil {
		b.Fatal(err)
	}
	nc, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 64<<10)
	if _, err := r.ReadSlice('\n'); err != nil { // the hello
		b.Fatal(err)
	}
	const depth = 16
	var req []byte
	for i := range depth {
		req = fmt.Appendf(req, `{"id":%d,"op":"state.load","args":{"agent":"bench","key":"v100"}}`+"\n", i+1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		if _, err := nc.Write(req); err != nil {
			b.Fatal(err)
		}
		for range depth {
			l, err := r.ReadSlice('\n')
			if err != nil || !bytes.Contains(l, []byte(`"ok":true`)) {
				b.Fatalf("%q %v", l, err)
			}
		}
	}
}
