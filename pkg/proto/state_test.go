package proto

import (
	"bytes"
	"strings"
	"testing"
)

func TestCheckKey(t *testing.T) {
	good := []string{"a", "a b", "a~b", "\u00a0", "notes/today.md", "a/b/c", ".hidden", "a..b", "ünïcode/ключ", strings.Repeat("k", 255)}
	for _, k := range good {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q) = %v, want ok", k, err)
		}
	}
	bad := map[string]string{
		"":                               EINVAL,
		"/etc/passwd":                    EINVAL,
		"../x":                           EINVAL,
		"a/../../x":                      EINVAL,
		"a/./b":                          EINVAL,
		".":                              EINVAL,
		"a//b":                           EINVAL,
		"a/":                             EINVAL,
		"a\x00b":                         EINVAL,
		"\xff\xfe":                       EINVAL,
		"a\nb":                           EINVAL,
		"a\rb":                           EINVAL,
		"a\tb":                           EINVAL,
		"a\x1bb":                         EINVAL,
		"a\x7fb":                         EINVAL,
		"a\u0085b":                       EINVAL,
		strings.Repeat("k", 256):         ENAMETOOLONG,
		strings.Repeat("abcdefgh/", 120): ENAMETOOLONG,
	}
	for k, code := range bad {
		err := CheckKey(k)
		if err == nil || err.Code != code {
			t.Errorf("CheckKey(%.30q) = %v, want %s", k, err, code)
		}
	}
}

func TestCheckAgent(t *testing.T) {
	for _, a := range []string{"ops", "a", "0", "web-1", "x.y_z", strings.Repeat("a", 63)} {
		if err := CheckAgent(a); err != nil {
			t.Errorf("CheckAgent(%q) = %v", a, err)
		}
	}
	for _, a := range []string{"", "Ops", "-x", ".x", "_x", "a b", "a/b", "ä", strings.Repeat("a", 64)} {
		if CheckAgent(a) == nil {
			t.Errorf("CheckAgent(%q) accepted", a)
		}
	}
}

func TestValueEncoding(t *testing.T) {
	for _, v := range [][]byte{nil, []byte("plain text\n"), []byte("\x00\x01\x02binary"), {0xff, 0xfe}, bytes.Repeat([]byte{0}, 100)} {
		s, enc := EncodeValue(v)
		if isText(v) != (enc == "") {
			t.Errorf("%q: encoding %q", v, enc)
		}
		back, err := DecodeValue(s, enc)
		if err != nil || !bytes.Equal(back, v) && len(v) > 0 {
			t.Errorf("%q: round trip gave %q, %v", v, back, err)
		}
	}
	if _, err := DecodeValue("!!", EncodingBase64); err == nil || err.Code != EINVAL {
		t.Errorf("bad base64 accepted: %v", err)
	}
	if MaxLineFor(DefaultMaxValue) < DefaultMaxValue*4/3 {
		t.Error("max line cannot carry a maximal base64 value")
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, p := range []string{"", "notes", "notes/", "a/b/"} {
		if err := CheckPrefix(p); err != nil {
			t.Errorf("CheckPrefix(%q) = %v", p, err)
		}
	}
	// "/" once panicked: its trailing slash trimmed, nothing was left.
	for _, p := range []string{"/", "//", "/notes", "a//", "../", "a/../b"} {
		if err := CheckPrefix(p); err == nil || err.Code != EINVAL {
			t.Errorf("CheckPrefix(%q) = %v, want EINVAL", p, err)
		}
	}
}

// Each rule runs its check: a key git reserves passes a read and is
// refused a store; a prefix may be empty.
func TestKeyRule(t *testing.T) {
	for _, tc := range []struct {
		rule KeyRule
		key  string
		ok   bool
	}{
		{KeyNone, "../anything", true},
		{KeyRead, "notes/a", true},
		{KeyRead, "../x", false},
		{KeyRead, ".gitmodules", true},
		{KeyStored, ".gitmodules", false},
		{KeyStored, "proj/.git/config", false},
		{KeyStored, "notes/a", true},
		{KeyPrefix, "", true},
		{KeyRead, "", false},
		{KeyPrefix, "a//b", false},
	} {
		if err := tc.rule.Check(tc.key); (err == nil) != tc.ok {
			t.Errorf("rule %d on %q: %v, want ok %v", tc.rule, tc.key, err, tc.ok)
		}
	}
}
