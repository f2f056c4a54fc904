package frontmatter

import (
	"errors"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	var lines []string
	text, opened, err := Scan([]byte("---\na: 1\n b :2 \n---\nthe text\n"), func(n int, l string) error {
		k, v, ok := Field(l)
		if !ok {
			t.Errorf("line %d %q: no field", n, l)
		}
		lines = append(lines, string(rune('0'+n))+k+"="+v)
		return nil
	})
	if err != nil || !opened || string(text) != "the text\n" || strings.Join(lines, " ") != "2a=1 3b=2" {
		t.Errorf("%q %v %v %q", text, opened, err, lines)
	}
	text, opened, err = Scan([]byte("no front matter\n"), func(int, string) error { t.Error("called"); return nil })
	if err != nil || opened || string(text) != "no front matter\n" {
		t.Errorf("%q %v %v", text, opened, err)
	}
	var u *Unclosed
	if _, _, err := Scan([]byte("---\na: 1\n"), func(int, string) error { return nil }); !errors.As(err, &u) || u.Line != 3 {
		t.Errorf("unclosed: %v", err)
	}
	stop := errors.New("stop")
	if _, _, err := Scan([]byte("---\na\n---\n"), func(int, string) error { return stop }); err != stop {
		t.Errorf("each's error: %v", err)
	}
}
