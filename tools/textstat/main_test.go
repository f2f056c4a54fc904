package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestTextstat(t *testing.T) {
	for _, c := range []struct {
		args []string
		in   string
		want Stats
	}{
		{nil, "The cat sat. The dog ran!\nThe end", Stats{Lines: 2, Words: 8, Chars: 33, Bytes: 33, Sentences: 3, DistinctWords: 6, AvgWordLength: 3, LongestWord: "the",
			TopWords: []Count{{"the", 3}, {"cat", 1}}}},
		{[]string{"-top", "1"}, "héllo héllo\n", Stats{Lines: 1, Words: 2, Chars: 12, Bytes: 14, Sentences: 1, DistinctWords: 1, AvgWordLength: 5, LongestWord: "héllo", TopWords: []Count{{"héllo", 2}}}},
		{nil, `{"text": "a b a", "top": 1}`, Stats{Lines: 1, Words: 3, Chars: 5, Bytes: 5, Sentences: 1, DistinctWords: 2, AvgWordLength: 1, LongestWord: "a", TopWords: []Count{{"a", 2}}}},
		{nil, "", Stats{TopWords: []Count{}}},
	} {
		var out, errb bytes.Buffer
		if st := run(append(c.args, []string{}...), strings.NewReader(c.in), &out, &errb); st != 0 {
			t.Fatalf("textstat %v: status %d: %s", c.args, st, errb.String())
		}
		var got Stats
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if c.args == nil && len(c.want.TopWords) == 2 {
			got.TopWords = got.TopWords[:2]
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(c.want)
		if string(g) != string(w) {
			t.Errorf("textstat %v %q:\n got %s\nwant %s", c.args, c.in, g, w)
		}
	}
	var out, errb bytes.Buffer
	if st := run([]string{"-x"}, strings.NewReader(""), &out, &errb); st != 2 {
		t.Errorf("textstat -x: status %d", st)
	}
}
