package llm

import (
	"strings"
	"testing"
)

func TestSchema(t *testing.T) {
	s, err := ParseSchema([]byte(`{"type":"object","properties":{"severity":{"enum":["low","high"]},"files":{"type":"array","items":{"type":"string"}}},"required":["severity"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ answer, want, err string }{
		{`{"severity": "low", "files": ["a.go"]}`, `{"severity":"low","files":["a.go"]}`, ""},
		{"```json\n{\"severity\":\"high\"}\n```", `{"severity":"high"}`, ""},
		{`{"severity": "medium"}`, "", "does not match the schema"},
		{`{"files": []}`, "", "does not match the schema"},
		{`{"severity": "low", "extra": 1}`, "", "does not match the schema"},
		{`Sure! {"severity": "low"}`, "", "not JSON"},
		{`{"severity": "low"} {"severity": "low"}`, "", "more than one"},
	} {
		got, err := s.Check(c.answer)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Check(%q) = %s, %v; want an error saying %q", c.answer, got, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("Check(%q) = %s, %v; want %s", c.answer, got, err, c.want)
		}
	}
	if _, err := ParseSchema([]byte(`{"type": 3}`)); err == nil {
		t.Error("a schema whose type is 3 parsed")
	}
	if _, err := ParseSchema([]byte(`not json`)); err == nil {
		t.Error("text parsed as a schema")
	}
}
