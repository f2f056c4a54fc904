package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/serve"
)

// FuzzDecodeRequest feeds arbitrary lines to the request decoder: it must
// never panic, and every refusal must carry an errno code and a message.
// `make test` runs it briefly; `make fuzz` runs it long.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"op":"state.save","args":{"agent":"ops","key":"k","value":"v"}}`,
		`{"id":2,"op":"state.load","args":{"agent":"ops","key":"k"}}`,
		`{"id":3,"op":"state.list","args":{"agent":"ops","prefix":"a/"}}`,
		`{"id":4,"op":"hello","args":{"proto":1}}`,
		`{"id":6,"op":"state.load"}`, `{"id":"x"}`, `[]`, `null`, `{"op":5}`, "{\"id\":1,\"op\":\"\xff\"}", `{"id":18446744073709551616}`,
		`{"id":7,"op":"state.load","op":"state.save","args":{"agent":"ops","key":"k","value":"v"}}`,
		`{"id":8,"op":"state.save","args":{"agent":"ops","key":"k","Key":"j","value":"v"}}`,
		`{"id":9,"op":"state.save","args":{"agent":"ops","key":"k"}}`,
		`{"id":10,"op":"state.load","args":{"agent":"ops","key":"\ud800x"}}`,
		`{"id":11,"op":"state.load","args":{"agent":"ops","key":"\ud83d\ude00"}}`,
		"{\"id\":12,\"op\":\"state.load\",\"args\":{\"agent\":\"ops\",\"key\":\"a\xc3\"}}",
		`{"id":13,"op":"state.save","args":{"agent":"ops","key":"a\nb","value":"v"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var req proto.Request
		h, err := decodeRequest(line, &req)
		if err != nil {
			if err.Code == "" || err.Message == "" {
				t.Fatalf("refusal without code or message: %+v", err)
			}
			_ = peekID(line)
			return
		}
		if want, ok := serve.Lookup(req.Op); !ok || h.Syscall != want.Syscall {
			t.Fatalf("accepted unknown op %q", req.Op)
		}
		// Nothing accepted is turned into something else by the decoder:
		// no invalid UTF-8, no field given twice.
		if strict := proto.DecodeArgs(req.Op, req.Args, &struct {
			Agent, Key, Value, Encoding, Prefix string
			Proto                               int
			Client                              string
		}{}); strict == nil && (proto.CheckFields(line, nil) != nil || !bytes.Equal(bytes.ToValidUTF8(line, nil), line)) {
			t.Fatalf("a line with a repeated field or invalid UTF-8 decoded: %q", line)
		}
		// Args of the state ops decode or are refused cleanly, on the fast
		// path and the slow one, whatever the args are (even absent).
		proto.DecodeStateArgs(req.Op, req.Args, &proto.StateArgs{})
		proto.DecodeSaveArgs(req.Args, &proto.StateSaveArgs{})
		var a proto.StateSaveArgs
		if derr := proto.DecodeArgs(req.Op, req.Args, &a); derr != nil && !strings.Contains(derr.Error(), req.Op) {
			t.Fatalf("args error does not name the op: %v", derr)
		}
	})
}

func TestReadLineLimits(t *testing.T) {
	long := strings.Repeat("x", 300<<10)
	mid := strings.Repeat("y", 90<<10)
	in := "short\n" + `{"id":77,` + long + "\n" + mid + "\nafter\nlast-without-newline"
	c := &conn{s: &Server{buffered: newBudget(1 << 20)}}
	r := bufio.NewReaderSize(strings.NewReader(in), 4096)
	want := []struct {
		line    string
		tooLong bool
	}{{"short", false}, {`{"id":77,`, true}, {mid, false}, {"after", false}, {"last-without-newline", false}}
	for i, w := range want {
		line, held, le, err := c.readLine(r, 100<<10, time.Now().Add(time.Second))
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if le != nil {
			line = le.head
		}
		if tooLong := le != nil; tooLong != w.tooLong || !bytes.HasPrefix(line, []byte(w.line[:min(len(w.line), 9)])) || !tooLong && string(line) != w.line {
			t.Fatalf("line %d: got %.40q tooLong=%v, want %.40q tooLong=%v", i, line, tooLong, w.line, w.tooLong)
		}
		if le != nil && (peekID(le.head) != 77 || le.err.Code != proto.EMSGSIZE) {
			t.Fatalf("oversized line: id %d, error %v", peekID(le.head), le.err)
		}
		// A long line holds what it needs from the budget, and no more than
		// half again; a short one holds nothing.
		if got := c.s.buffered.inUse(); got != held || len(line) > 4096 && (held < int64(len(line)) || held > int64(len(line))*3/2+64<<10) || len(line) <= 4096 && held != 0 {
			t.Fatalf("line %d of %d bytes: held %d, budget in use %d", i, len(line), held, got)
		}
		c.s.buffered.give(held)
	}
	if _, _, _, err := c.readLine(r, 100<<10, time.Now()); err == nil {
		t.Fatal("no error at the end of input")
	}
	// A line the budget cannot hold is refused once its deadline passes,
	// and gives back what it took.
	c.s.buffered = newBudget(32 << 10)
	r = bufio.NewReaderSize(strings.NewReader(`{"id":5,`+mid+"\nnext\n"), 4096)
	_, held, le, err := c.readLine(r, 100<<10, time.Now().Add(50*time.Millisecond))
	if err != nil || le == nil || le.err.Code != proto.ENOBUFS || peekID(le.head) != 5 || held != 0 || c.s.buffered.inUse() != 0 {
		t.Fatalf("over budget: held %d, error %v %v, in use %d", held, le, err, c.s.buffered.inUse())
	}
	if line, _, _, _ := c.readLine(r, 100<<10, time.Now()); string(line) != "next" {
		t.Fatalf("after a refused line: %q", line)
	}
}

func TestPeekID(t *testing.T) {
	for line, want := range map[string]uint64{
		`{"id":42,"op":`: 42, `{"op":"x", "id" : 7`: 7, `{"id":"7"}`: 0, `garbage`: 0, `{"id":`: 0,
	} {
		if got := peekID([]byte(line)); got != want {
			t.Errorf("peekID(%q) = %d, want %d", line, got, want)
		}
	}
}

// FuzzFastPath: whatever the fast path accepts, encoding/json reads the
// same way; the fast path may only decline, never differ. (The args' fast
// path is held to the same by proto's FuzzFastArgs.)
func FuzzFastPath(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"op":"state.save","args":{"agent":"ops","key":"k","value":"v"}}`,
		`{"id":2,"op":"state.load","args":{"agent":"ops","key":"k"}}`,
		`{"id":3,"op":"state.load","args":{"agent":"ops","key":"k","key":"j"}}`,
		`{"id":4,"op":"state.save","args":{"agent":"ops","key":"k","value":"ü\u00e9","encoding":""}}`,
		`{"id":5,"op":"state.load","args":{"agent":"a"},"x":{"key":"b"}}`,
		`{"id":06,"op":"state.load","args":{"agent":"a","key":"b"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, ok := fastRequest(line)
		if !ok {
			return
		}
		var slow proto.Request
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatalf("fast path took %q, encoding/json refuses it: %v", line, err)
		}
		if slow.ID != req.ID || slow.Op != req.Op || !bytes.Equal(slow.Args, req.Args) {
			t.Fatalf("%q: fast %d %q %s, slow %d %q %s", line, req.ID, req.Op, req.Args, slow.ID, slow.Op, slow.Args)
		}
	})
}
