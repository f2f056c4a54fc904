package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
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
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := decodeRequest(line)
		if err != nil {
			if err.Code == "" || err.Message == "" {
				t.Fatalf("refusal without code or message: %+v", err)
			}
			_ = peekID(line)
			return
		}
		if served(req.Op) == nil {
			t.Fatalf("accepted unknown op %q", req.Op)
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
	in := "short\n" + `{"id":77,` + long + "\nafter\nlast-without-newline"
	r := bufio.NewReaderSize(strings.NewReader(in), 4096)
	want := []struct {
		line    string
		tooLong bool
	}{{"short", false}, {`{"id":77,`, true}, {"after", false}, {"last-without-newline", false}}
	for i, w := range want {
		line, tooLong, err := readLine(r, 100<<10)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if tooLong != w.tooLong || !bytes.HasPrefix(line, []byte(w.line)) || !tooLong && string(line) != w.line {
			t.Fatalf("line %d: got %.40q tooLong=%v, want %.40q tooLong=%v", i, line, tooLong, w.line, w.tooLong)
		}
		if tooLong && peekID(line) != 77 {
			t.Fatalf("id of the oversized line not recovered: %d", peekID(line))
		}
	}
	if _, _, err := readLine(r, 100<<10); err == nil {
		t.Fatal("no error at the end of input")
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
