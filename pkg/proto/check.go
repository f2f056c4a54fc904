package proto

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The value checks of the contract, in one place: the kernel's gate runs
// them on every call, whichever front end made it (the socket server, the
// mount), and clients may run them early to give a usage error without a
// round trip. Each returns why a value is refused, as an error with its
// errno code, or nil.

// CheckAgent reports why name is not a valid agent name, or nil.
// Agent names are [a-z0-9][a-z0-9._-]{0,62}: they are directory names,
// user-visible in paths, and safe in shells without quoting.
func CheckAgent(name string) *Error {
	if name == "" {
		return Errorf(EINVAL, "agent name is empty (give one with -a AGENT)")
	}
	if len(name) > MaxAgentLen {
		return Errorf(ENAMETOOLONG, "agent name %.20q... is %d bytes, more than %d", name, len(name), MaxAgentLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		lower := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if lower || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		return Errorf(EINVAL, "agent name %q: byte %d (%q) not allowed; names are [a-z0-9][a-z0-9._-]{0,62}", name, i, c)
	}
	return nil
}

// CheckKey reports why key is not a valid state key, or nil. A key is a
// relative slash-separated path: not empty, not absolute, no "." or ".."
// or empty element, no NUL, valid UTF-8, at most MaxKeyLen bytes.
func CheckKey(key string) *Error {
	return checkPath("key", key, false)
}

// CheckPrefix is CheckKey for a list prefix, which may be empty and may end
// in a slash.
func CheckPrefix(prefix string) *Error {
	if prefix == "" {
		return nil
	}
	if strings.HasPrefix(prefix, "/") {
		// Checked before the trailing slash goes: "/" would become "".
		return Errorf(EINVAL, "prefix %q is absolute; keys are relative paths like notes/ (give no prefix for all keys)", prefix)
	}
	return checkPath("prefix", strings.TrimSuffix(prefix, "/"), true)
}

// isControl reports whether r is a C0 or C1 control character or DEL: a
// newline in a key would break every line-based list of keys, the daemon's
// own list of uncommitted paths among them.
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r < 0xa0 }

func checkPath(what, key string, prefix bool) *Error {
	switch {
	case key == "" && !prefix:
		return Errorf(EINVAL, "%s is empty", what)
	case len(key) > MaxKeyLen:
		return Errorf(ENAMETOOLONG, "%s is %d bytes, more than %d", what, len(key), MaxKeyLen)
	case strings.IndexByte(key, 0) >= 0:
		return Errorf(EINVAL, "%s %q contains a NUL byte", what, key)
	case !utf8.ValidString(key):
		return Errorf(EINVAL, "%s %q is not valid UTF-8", what, key)
	case strings.IndexFunc(key, isControl) >= 0:
		i := strings.IndexFunc(key, isControl)
		r, _ := utf8.DecodeRuneInString(key[i:])
		return Errorf(EINVAL, "%s %q has a control character (%U) at byte %d; keys are printable text", what, key, r, i)
	case key[0] == '/':
		return Errorf(EINVAL, "%s %q is absolute; keys are relative paths like notes/today.md", what, key)
	}
	for elem := range strings.SplitSeq(key, "/") {
		switch {
		case elem == "":
			return Errorf(EINVAL, "%s %q has an empty path element", what, key)
		case elem == "." || elem == "..":
			return Errorf(EINVAL, "%s %q has a %q element; keys may not leave the agent's state", what, key, elem)
		case len(elem) > MaxKeyElem:
			return Errorf(ENAMETOOLONG, "%s %q has an element of %d bytes, more than %d", what, key, len(elem), MaxKeyElem)
		}
	}
	return nil
}

// CheckStoredKey is CheckKey for a key that is about to be stored: it also
// refuses the names git reserves (".git", ".gitmodules" and their
// aliases), which could be saved but never committed.
func CheckStoredKey(key string) *Error {
	if err := CheckKey(key); err != nil {
		return err
	}
	for elem := range strings.SplitSeq(key, "/") {
		if GitReserved(elem) {
			return Errorf(EINVAL, "key %q has the element %q, which git reserves; it could never be committed", key, elem)
		}
	}
	return nil
}

// KeyRule names the check a syscall gives the key (or prefix) a call
// names, so that every front end checks it alike.
type KeyRule int

const (
	KeyNone   KeyRule = iota
	KeyRead           // CheckKey
	KeyStored         // CheckStoredKey: also no name git reserves
	KeyPrefix         // CheckPrefix
)

// Check reports why key does not pass r, or nil.
func (r KeyRule) Check(key string) *Error {
	switch r {
	case KeyRead:
		return CheckKey(key)
	case KeyStored:
		return CheckStoredKey(key)
	case KeyPrefix:
		return CheckPrefix(key)
	}
	return nil
}

// GitReserved reports whether a path element would be taken for ".git" or
// ".gitmodules" by git on some file system (git's is_hfs_dotgit,
// is_ntfs_dotgit and their .gitmodules twins, made a little stricter).
func GitReserved(elem string) bool {
	// The quick answer for the usual name: none of the reserved names, or
	// their aliases, lacks a '.', a '~' or a non-ASCII byte.
	plain := true
	for i := 0; i < len(elem); i++ {
		if c := elem[i]; c == '.' || c == '~' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return false
	}
	var b strings.Builder
	for _, r := range elem {
		if !hfsIgnorable(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	s := b.String()
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i] // NTFS alternate data stream: ".git::$INDEX_ALLOCATION"
	}
	s = strings.TrimRight(s, " .")
	switch s {
	case ".git", ".gitmodules", "git~1":
		return true
	}
	if len(s) == 8 && s[6] == '~' && s[7] >= '1' && s[7] <= '4' {
		return s[:6] == "gitmod" || s[:6] == "gi7eba"
	}
	return false
}

// hfsIgnorable lists the code points HFS+ ignores in names.
func hfsIgnorable(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}

// Memory values.
const (
	MemWorking  = "working"
	MemEpisodic = "episodic"
	MemSemantic = "semantic"
	MaxTagLen   = 64
	MemIDLen    = 26
)

// CheckMemKind reports why k is not a kind of memory.
func CheckMemKind(k string) *Error {
	switch k {
	case MemWorking, MemEpisodic, MemSemantic:
		return nil
	}
	return Errorf(EINVAL, "kind %q: want working, episodic or semantic", k)
}

// CheckTag reports why t is not a valid tag.
func CheckTag(t string) *Error {
	if t == "" {
		return Errorf(EINVAL, "empty tag")
	}
	if len(t) > MaxTagLen {
		return Errorf(EINVAL, "tag %.20q... is longer than %d bytes", t, MaxTagLen)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("._:/-", c) >= 0 {
			continue
		}
		return Errorf(EINVAL, "tag %q: byte %d (%q) not allowed; tags are [a-z0-9._:/-]", t, i, c)
	}
	return nil
}

// crockford is Crockford's base32, as ULIDs (and memory ids) use it.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// CheckMemID reports why id is not a memory id.
func CheckMemID(id string) *Error {
	if len(id) != MemIDLen {
		return Errorf(EINVAL, "id %.30q: want %d characters", id, MemIDLen)
	}
	for i := 0; i < len(id); i++ {
		if strings.IndexByte(crockford, id[i]) < 0 {
			return Errorf(EINVAL, "id %q: byte %d (%q) is not Crockford base32", id, i, id[i])
		}
	}
	if strings.IndexByte(crockford, id[0]) > 7 {
		return Errorf(EINVAL, "id %q: first character out of range", id)
	}
	return nil
}

// Printable reports whether s shows as it is on a terminal: valid UTF-8
// of printable runes (strconv.IsPrint) and ASCII spaces, with no control
// character, escape sequence, bidirectional override or zero-width
// character that would make a terminal show other text than s holds.
// What is not printable is shown Go-quoted (policy.Quote, an approval's
// what, cliutil.Cell).
func Printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != ' ' && !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}
