package server

import (
	"bufio"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/serve"
)

// A save runs on the reading goroutine only when it is all the connection
// has: nothing in flight, nothing received behind it, neither in the read
// buffer nor in the bytes the idle wait read.
func TestAlone(t *testing.T) {
	const save = `{"id":1,"op":"state.save","args":{"agent":"a","key":"k","value":"v"}}` + "\n"
	// Only these wait for nothing but their commit, and answer with one
	// record. Streams (mem.forget's records) and other waits (an
	// approval, an exec, a run, a message) would hold the connection's
	// reading.
	alone := map[string]bool{proto.OpStateSave: true, proto.OpStateDelete: true, proto.OpMemRemember: true}
	for op := range alone {
		if h, ok := serve.Lookup(op); !ok || !h.Alone || h.Inline {
			t.Errorf("%s: served %v, Alone %v, Inline %v; want Alone only", op, ok, h.Alone, h.Inline)
		}
	}
	for _, sc := range kernel.Syscalls() {
		if sc.Alone && !alone[sc.Op] {
			t.Errorf("%s is Alone", sc.Op)
		}
	}
	read := func(in string, primed string) (*conn, *bufio.Reader) {
		c := &conn{}
		c.primed.b = []byte(primed)
		r := bufio.NewReader(strings.NewReader(in))
		if _, err := r.ReadSlice('\n'); err != nil {
			t.Fatal(err)
		}
		return c, r
	}
	if c, r := read(save, ""); !c.alone(r) {
		t.Error("a single request is not alone")
	}
	if c, r := read(save+save, ""); c.alone(r) {
		t.Error("a request with another buffered behind it is alone")
	}
	if c, r := read(save, `{"id":2`); c.alone(r) {
		t.Error("a request with bytes of another in the primed buffer is alone")
	}
	c, r := read(save, "")
	c.nflight.Add(1)
	if c.alone(r) {
		t.Error("a request with another in flight is alone")
	}
}
