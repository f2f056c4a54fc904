package audit

import (
	"strings"
	"testing"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc..."},
		{"a\xffb", 10, "a?b"},
		{"aé", 2, "a..."}, // é is two bytes: cut before it, not inside
		{strings.Repeat("x", MaxTarget+1), MaxTarget, strings.Repeat("x", MaxTarget) + "..."},
	} {
		if got := Clip(c.in, c.max); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
