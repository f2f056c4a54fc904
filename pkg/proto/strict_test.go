package proto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// rememberBatch is a mem.remember request's args as ox-remember sends
// them: 1000 memories of a line of text each.
func rememberBatch() []byte {
	a := MemRememberArgs{Agent: "bench"}
	for i := range 1000 {
		a.Memories = append(a.Memories, MemoryInput{Text: fmt.Sprintf("line %d of the \"CISI\" collection: information retrieval, indexing and %s", i, strings.Repeat("text ", 10)), Tags: []string{"cisi"}})
	}
	b, _ := json.Marshal(a)
	return b
}

func BenchmarkDecodeRememberArgs(b *testing.B) {
	args := rememberBatch()
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		var a MemRememberArgs
		if err := DecodeArgs(OpMemRemember, args, &a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckFields(b *testing.B) {
	args := rememberBatch()
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckFields(args, map[string]bool{}); err != nil {
			b.Fatal(err)
		}
	}
}

// CheckFields refuses a field given twice at any depth, names matching
// regardless of case (as encoding/json matches them), naming its path,
// and reports the top level's names.
func TestCheckFields(t *testing.T) {
	for _, c := range []struct {
		in, err string
		top     []string
	}{
		{`{"agent":"a","memories":[{"text":"x","tags":["a","b"]},{"text":"y"}]}`, "", []string{"agent", "memories"}},
		{`{"agent":"a","Agent":"b"}`, `"Agent" more than once`, nil},
		{`{"agent":"a","memories":[{"text":"x","TEXT":"y"}]}`, `"memories.TEXT" more than once`, nil},
		{`{"a":{"b":{"c":1,"c":2}}}`, `"a.b.c" more than once`, nil},
		{`{"a":{"b":1},"c":{"b":2}}`, "", []string{"a", "c"}},
		{`{"t\u0065xt":"x","text":"y"}`, `"text" more than once`, nil},
		{`{"f1":1,"f2":2,"f3":3,"f4":4,"f5":5,"f6":6,"f7":7,"f8":8,"f9":9,"f10":10,"f5":0}`, `"f5" more than once`, nil},
		{`{"x":[{"k":1},{"k":2}],"y":"}"}`, "", []string{"x", "y"}},
	} {
		top := map[string]bool{}
		err := CheckFields([]byte(c.in), top)
		if c.err == "" {
			if err != nil {
				t.Errorf("%s: %v", c.in, err)
			}
			for _, n := range c.top {
				if !top[n] {
					t.Errorf("%s: top level lacks %q: %v", c.in, n, top)
				}
			}
			if len(top) != len(c.top) {
				t.Errorf("%s: top level %v, want %v", c.in, top, c.top)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Message, c.err) {
			t.Errorf("%s: %v, want %s", c.in, err, c.err)
		}
	}
}

// FuzzRememberArgs: whatever mem.remember's fast path accepts, the
// general path (CheckText, encoding/json, CheckFields) reads the same way;
// the fast path may only decline, never differ.
func FuzzRememberArgs(f *testing.F) {
	for _, s := range []string{
		`{"agent":"ops","memories":[{"text":"disk full on /var"}]}`,
		`{"agent":"ops","memories":[{"kind":"semantic","text":"a \"quoted\" \\ line\n\t\u00e9\ud83d\ude00","tags":["a","b"],"source":"s","importance":0.75,"ttl":"1h"},{"text":""}]}`,
		`{"agent":"ops","memories":[]}`,
		`{"agent":"ops","memories":[{"text":"x","text":"y"}]}`,
		`{"agent":"ops","memories":[{"text":"x","Text":"y"}]}`,
		`{"agent":"ops","memories":[{"text":"\ud800"}]}`,
		`{"agent":"ops","memories":[{"text":"x","importance":01}]}`,
		`{"agent":"ops","memories":[{"text":"x","importance":1e999}]}`,
		`{"agent":"ops","memories":[{"text":"x","tags":[]}]}`,
		`{"agent":"ops","memories":null}`,
		`{"agent":"ops","memories":[{"text":"x"}],"x":1}`,
		`{"agent":"ops","memories":[{"text":"x"}]} `,
	} {
		f.Add([]byte(s))
	}
	f.Add(rememberBatch())
	f.Fuzz(func(t *testing.T, args []byte) {
		var fa MemRememberArgs
		if !fastRememberArgs(args, &fa) {
			return
		}
		var sa MemRememberArgs
		if perr := CheckText(args); perr != nil {
			t.Fatalf("%s: fast path took what CheckText refuses: %v", args, perr)
		}
		d := json.NewDecoder(bytes.NewReader(args))
		d.DisallowUnknownFields()
		if err := d.Decode(&sa); err != nil || d.More() {
			t.Fatalf("%s: fast path took what encoding/json refuses: %v", args, err)
		}
		if perr := CheckFields(args, map[string]bool{}); perr != nil {
			t.Fatalf("%s: fast path took what CheckFields refuses: %v", args, perr)
		}
		if !reflect.DeepEqual(fa, sa) {
			t.Fatalf("%s:\nfast %+v\nslow %+v", args, fa, sa)
		}
	})
}
