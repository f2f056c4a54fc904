package server

import (
	"bufio"
	"bytes"
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
		`{"id":"x"}`, `[]`, `null`, `{"op":5}`, "{\"id\":1,\"op\":\"\xff\"}", `{"id":18446744073709551616}`,
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
		if _, ok := handlers[req.Op]; !ok {
			t.Fatalf("accepted unknown op %q", req.Op)
		}
		// Args of the state ops decode or are refused cleanly.
		var a proto.StateSaveArgs
		if derr := decodeArgs(req, &a); derr != nil && !strings.Contains(derr.Error(), req.Op) {
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
