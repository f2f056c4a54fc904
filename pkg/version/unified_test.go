package version

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func lines(n int, edit map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := edit[i]; ok {
			b.WriteString(s)
			continue
		}
		fmt.Fprintf(&b, "line %d of the file\n", i)
	}
	return b.String()
}

// TestUnifiedMatchesGit compares Unified with `git diff --cached
// --full-index` for the same change staged in a scratch repository.
func TestUnifiedMatchesGit(t *testing.T) {
	needGit(t)
	const absent = "\x00absent"
	cases := []struct{ name, from, to string }{
		{"one line changed", lines(30, nil), lines(30, map[int]string{15: "changed\n"})},
		{"two hunks", lines(40, nil), lines(40, map[int]string{5: "five\n", 30: "thirty\n"})},
		{"hunks joined", lines(30, nil), lines(30, map[int]string{10: "ten\n", 15: "fifteen\n"})},
		{"line added and removed", lines(20, nil), lines(20, map[int]string{3: "", 12: "line 12 of the file\nnew\n"})},
		{"first and last", lines(10, nil), lines(10, map[int]string{1: "first\n", 10: "last\n"})},
		{"no newline at end", lines(5, nil), strings.TrimSuffix(lines(5, nil), "\n")},
		{"newline added at end", "a\nb", "a\nb\n"},
		{"new file", absent, "one\ntwo\nthree\n"},
		{"deleted file", lines(4, nil), absent},
		{"new empty file", absent, ""},
		{"deleted empty file", "", absent},
		{"empty to content", "", "x\n"},
		{"content to empty", "x\ny\n", ""},
		{"binary", "a\x00b", "a\x00c"},
		{"new binary", absent, "\x00\x01"},
		{"text to binary", "text\n", "bin\x00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git(t, dir, "init", "-q")
			path := filepath.Join(dir, "agents", "ops", "state", "f.md")
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644)
			if tc.from != absent {
				os.WriteFile(path, []byte(tc.from), 0o644)
			}
			git(t, dir, "add", "-A")
			git(t, dir, "commit", "-q", "-m", "from")
			if tc.to == absent {
				os.Remove(path)
			} else {
				os.WriteFile(path, []byte(tc.to), 0o644)
			}
			git(t, dir, "add", "-A")
			want := git(t, dir, "-c", "diff.noprefix=false", "diff", "--cached", "--full-index", "--no-color", "--no-renames")

			var b strings.Builder
			err := Unified(&b, "agents/ops/state/f.md", []byte(strings.TrimPrefix(tc.from, absent)), []byte(strings.TrimPrefix(tc.to, absent)), tc.from != absent, tc.to != absent)
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != want {
				t.Fatalf("Unified:\n%s\ngit diff:\n%s", b.String(), want)
			}
		})
	}
	var b strings.Builder
	if err := Unified(&b, "p", []byte("same"), []byte("same"), true, true); err != nil || b.Len() != 0 {
		t.Fatalf("no change: %q %v", b.String(), err)
	}
}
