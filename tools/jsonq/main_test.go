package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestJsonq(t *testing.T) {
	doc := `{"items":[{"name":"a","n":1},{"name":"b","n":2.5}],"a":{"b":true},"odd key":"x]"}`
	for _, c := range []struct {
		args   []string
		in     string
		out    string
		status int
	}{
		{[]string{".items[0].name"}, doc, "\"a\"\n", 0},
		{[]string{"-r", ".items[-1].name"}, doc, "b\n", 0},
		{[]string{".items[].n"}, doc, "1\n2.5\n", 0},
		{[]string{".a.b"}, doc, "true\n", 0},
		{[]string{`.["odd key"]`}, doc, "\"x]\"\n", 0},
		{[]string{"."}, `[1, 2]`, "[1,2]\n", 0},
		{nil, `{"path":".a","data":{"a":[1]}}`, "[1]\n", 0},
		{nil, `{"path":".a","data":{"a":"s"},"raw":true}`, "s\n", 0},
		{[]string{".nope"}, doc, "", 1},
		{[]string{".items[9]"}, doc, "", 1},
		{[]string{".a..b"}, doc, "", 2},
		{[]string{"items"}, doc, "", 2},
		{[]string{".a"}, `{`, "", 2},
		{nil, `not json`, "", 2},
	} {
		var out, errb bytes.Buffer
		st := run(c.args, strings.NewReader(c.in), &out, &errb)
		if st != c.status || out.String() != c.out {
			t.Errorf("jsonq %v: status %d out %q (stderr %q), want %d %q", c.args, st, out.String(), errb.String(), c.status, c.out)
		}
	}
}
