package audit

import (
	"strings"
	"unicode/utf8"
)

// MaxTarget bounds what an entry's target names of a command line, a URL
// or what an approval is asked for.
const MaxTarget = 256

// Clip makes s fit an entry's target: valid UTF-8, at most max bytes,
// cut at a rune.
func Clip(s string, max int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
