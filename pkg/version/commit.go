package version

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Signature is who made a commit and when.
type Signature struct {
	Name  string
	Email string
	When  time.Time
}

// Trailer is one "Key: value" line of a commit message's final paragraph
// (git interpret-trailers), such as "Oxios-Audit-Seq: 42".
type Trailer struct {
	Key   string
	Value string
}

// The actions of a PathChange.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// PathChange is the change of one file between two versions.
type PathChange struct {
	Path   string // slash-separated, from the root of the repository
	Action string // Added, Modified or Deleted
	From   string // the blob hash before, "" when the file did not exist
	To     string // the blob hash after, "" when the file no longer exists
}

// Commit describes a commit.
type Commit struct {
	Hash   string
	Parent string // the first parent; "" for the first commit
	Tree   string
	// Changed lists the files the commit changed against its first
	// parent, sorted by path (limited to the prefix by Log).
	Changed   []PathChange
	Time      time.Time // the committer's time
	Message   string    // without the trailers and the final newline
	Trailers  []Trailer
	Author    Signature
	Committer Signature
}

// commitData is a parsed commit object.
type commitData struct {
	tree      oid
	parents   []oid
	author    Signature
	committer Signature
	message   string // raw, as stored
}

// Defaults for a signature that leaves fields empty.
const (
	defaultName  = "oxiosd"
	defaultEmail = "oxiosd@localhost"
)

// normalize fills defaults and checks that git can store the signature:
// no '<', '>' or newline in name or email (fsck: badName, badEmail).
func (s Signature) normalize(what string) (Signature, error) {
	s.Name = strings.TrimSpace(s.Name)
	s.Email = strings.TrimSpace(s.Email)
	if s.Name == "" {
		s.Name = defaultName
	}
	if s.Email == "" {
		s.Email = defaultEmail
	}
	if s.When.IsZero() {
		s.When = time.Now()
	}
	for _, f := range []string{s.Name, s.Email} {
		if strings.ContainsAny(f, "<>\n\x00") {
			return s, fmt.Errorf("%w: %s %q may not contain '<', '>', a newline or NUL", ErrBadName, what, f)
		}
	}
	return s, nil
}

// appendSignature appends "Name <email> unix +hhmm".
func appendSignature(b []byte, s Signature) []byte {
	b = append(b, s.Name...)
	b = append(b, " <"...)
	b = append(b, s.Email...)
	b = append(b, "> "...)
	b = strconv.AppendInt(b, s.When.Unix(), 10)
	_, off := s.When.Zone()
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = append(b, ' ', sign)
	return fmt.Appendf(b, "%02d%02d", off/3600, off/60%60)
}

// parseSignature parses what appendSignature writes.
func parseSignature(s string) (Signature, error) {
	lt := strings.LastIndexByte(s, '<')
	gt := strings.LastIndexByte(s, '>')
	if lt < 0 || gt < lt {
		return Signature{}, fmt.Errorf("%w: signature %q", errCorrupt, s)
	}
	sig := Signature{Name: strings.TrimSpace(s[:lt]), Email: s[lt+1 : gt]}
	f := strings.Fields(s[gt+1:])
	if len(f) != 2 || len(f[1]) != 5 {
		return Signature{}, fmt.Errorf("%w: signature time %q", errCorrupt, s[gt+1:])
	}
	sec, err1 := strconv.ParseInt(f[0], 10, 64)
	hh, err2 := strconv.Atoi(f[1][1:3])
	mm, err3 := strconv.Atoi(f[1][3:5])
	if err1 != nil || err2 != nil || err3 != nil {
		return Signature{}, fmt.Errorf("%w: signature time %q", errCorrupt, s[gt+1:])
	}
	off := hh*3600 + mm*60
	if f[1][0] == '-' {
		off = -off
	}
	sig.When = time.Unix(sec, 0).In(time.FixedZone("", off))
	return sig, nil
}

// trailerKey is the form of a trailer key this package writes and reads:
// what git interpret-trailers accepts, without spaces.
var trailerKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`)

// buildMessage joins a message and its trailers the way git expects:
// subject, body, a blank line, then one "Key: value" line per trailer.
func buildMessage(msg string, trailers []Trailer) (string, error) {
	msg = strings.Trim(msg, "\n")
	msg = strings.TrimRight(msg, " \t\n")
	if strings.TrimSpace(msg) == "" {
		return "", fmt.Errorf("%w: commit message is empty", ErrBadName)
	}
	if strings.IndexByte(msg, 0) >= 0 {
		return "", fmt.Errorf("%w: commit message contains a NUL byte", ErrBadName)
	}
	var b strings.Builder
	b.WriteString(msg)
	b.WriteByte('\n')
	for i, t := range trailers {
		if !trailerKey.MatchString(t.Key) {
			return "", fmt.Errorf("%w: trailer key %q (letters, digits and '-' only)", ErrBadName, t.Key)
		}
		v := strings.TrimSpace(t.Value)
		if v == "" || strings.ContainsAny(v, "\n\x00") {
			return "", fmt.Errorf("%w: trailer %s: value %q must be one non-empty line", ErrBadName, t.Key, t.Value)
		}
		if i == 0 {
			b.WriteByte('\n')
		}
		b.WriteString(t.Key + ": " + v + "\n")
	}
	return b.String(), nil
}

// splitTrailers splits a stored message into the text and the trailers of
// its final paragraph. A final paragraph counts as trailers when it is not
// the only paragraph and every line of it is "Key: value".
func splitTrailers(raw string) (string, []Trailer) {
	msg := strings.TrimRight(raw, "\n")
	i := strings.LastIndex(msg, "\n\n")
	if i < 0 {
		return msg, nil
	}
	var ts []Trailer
	for line := range strings.SplitSeq(msg[i+2:], "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok || !trailerKey.MatchString(k) {
			return msg, nil
		}
		ts = append(ts, Trailer{Key: k, Value: v})
	}
	return strings.TrimRight(msg[:i], "\n"), ts
}

// encodeCommit lays out a commit object.
func encodeCommit(tree oid, parent oid, author, committer Signature, message string) []byte {
	b := make([]byte, 0, 256+len(message))
	b = append(b, "tree "...)
	b = append(b, tree.String()...)
	b = append(b, '\n')
	if parent != zeroID {
		b = append(b, "parent "...)
		b = append(b, parent.String()...)
		b = append(b, '\n')
	}
	b = append(b, "author "...)
	b = appendSignature(b, author)
	b = append(b, "\ncommitter "...)
	b = appendSignature(b, committer)
	b = append(b, "\n\n"...)
	return append(b, message...)
}

// parseCommit decodes a commit object. Headers it does not use (encoding,
// gpgsig and their continuation lines) are skipped.
func parseCommit(data []byte) (commitData, error) {
	var c commitData
	hdr, msg, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok {
		hdr, msg = bytes.TrimSuffix(data, []byte("\n")), nil
	}
	seenTree := false
	for line := range strings.SplitSeq(string(hdr), "\n") {
		key, val, _ := strings.Cut(line, " ")
		var err error
		switch key {
		case "tree":
			var ok bool
			if c.tree, ok = parseID(val); !ok {
				err = fmt.Errorf("%w: commit tree %q", errCorrupt, val)
			}
			seenTree = true
		case "parent":
			p, ok := parseID(val)
			if !ok {
				err = fmt.Errorf("%w: commit parent %q", errCorrupt, val)
			}
			c.parents = append(c.parents, p)
		case "author":
			c.author, err = parseSignature(val)
		case "committer":
			c.committer, err = parseSignature(val)
		}
		if err != nil {
			return c, err
		}
	}
	if !seenTree {
		return c, fmt.Errorf("%w: commit without a tree", errCorrupt)
	}
	c.message = string(msg)
	return c, nil
}

// readCommit reads and decodes the commit id.
func (r *Repo) readCommit(id oid) (commitData, error) {
	data, err := r.db.readType(id, objCommit)
	if err != nil {
		return commitData{}, err
	}
	c, err := parseCommit(data)
	if err != nil {
		return c, fmt.Errorf("commit %s: %w", id, err)
	}
	return c, nil
}

// describe makes the exported Commit of a parsed one.
func describe(id oid, c commitData, changed []PathChange) Commit {
	msg, trailers := splitTrailers(c.message)
	out := Commit{Hash: id.String(), Tree: c.tree.String(), Changed: changed, Time: c.committer.When,
		Message: msg, Trailers: trailers, Author: c.author, Committer: c.committer}
	if len(c.parents) > 0 {
		out.Parent = c.parents[0].String()
	}
	return out
}
