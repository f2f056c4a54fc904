package mcpbridge

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Listen opens the listener of ServeHTTP's address: "unix:PATH" (a
// socket made 0600, so only its owner connects) or a loopback "HOST:PORT"
// (127.0.0.1, ::1 or localhost; any other address is refused: the bridge
// acts with its starter's identity and must not be reachable from
// elsewhere).
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, fmt.Errorf("--http unix: give a socket path, e.g. unix:/run/user/1000/ox-mcp.sock")
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := net.Dial("unix", path); err == nil {
				c.Close()
				return nil, fmt.Errorf("%s: something is listening there already", path)
			}
			os.Remove(path) // stale
		}
		// The umask makes the socket 0600 from its first moment, before
		// the chmod that documents it.
		old := umask(0o177)
		l, err := net.Listen("unix", path)
		umask(old)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(path, 0o600); err != nil {
			l.Close()
			return nil, err
		}
		return l, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: want unix:PATH or 127.0.0.1:PORT (%v)", addr, err)
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("--http %q: only a loopback address (127.0.0.1, [::1], localhost) or unix:PATH; the bridge acts as you and must not be reachable from other hosts", addr)
		}
	}
	return net.Listen("tcp", addr)
}

// NewToken returns a random bearer token for a loopback listener.
func NewToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ServeHTTP serves the streamable HTTP transport on l until ctx ends. On
// a TCP listener every request must carry "Authorization: Bearer TOKEN":
// any local user can reach a loopback port, and the bridge acts with the
// identity of whoever started it. A Unix socket is guarded by its mode.
func (s *Server) ServeHTTP(ctx context.Context, l net.Listener, token string) error {
	if _, isTCP := l.Addr().(*net.TCPAddr); isTCP && token == "" {
		return errors.New("a loopback listener needs a token")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.Watch(ctx)
	h := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil))
	if _, isTCP := l.Addr().(*net.TCPAddr); isTCP {
		h = bearer(token, h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func bearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ox-mcp"`)
			http.Error(w, "ox-mcp: missing or wrong bearer token (it is printed at start, or set with OXIOS_MCP_TOKEN)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
