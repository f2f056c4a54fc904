// Package receipt writes and checks a run's receipt (ox-receipt, issue
// 48): one self-contained file that proves to someone else what a run of
// an agent did and did not do, checked offline, without the daemon.
//
// A receipt is JSON lines: a header (the run, its agent, the seqs of the
// audit entries of its spawn and its exit, the digest of its log and of
// its work's patch, the version of the policy it started under, the
// state commits before and after it, the last entry it holds); the run's log as the daemon kept it (its run record,
// its output, its exit record: "receipt_run" lines, each the log's line
// as a string); the patch of its work on a host folder ("receipt_patch");
// then the audit log's own lines, unchanged, from the entry of the commit
// before the run (or of its spawn) to the log's head when the receipt
// was made. Every part is bound to the chain: the entries link to each
// other by their hashes, the exit entry names the digest of the run's log
// (whose first line, the run's record, names its policy's version) and
// of the work's patch, the spawn and exit entries name the run, the
// commits' entries name the commits; and the chain is bound to a head
// kept elsewhere (an export, ox-audit head, a commit's trailers, a
// peer's witness), so a changed byte, a dropped entry or another run's
// entries do not verify.
package receipt

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// Record types of a receipt's lines.
const (
	TypeHeader = "receipt"
	TypeRun    = "receipt_run"
	TypePatch  = "receipt_patch"
)

// Version is the receipt format's.
const Version = 1

// Commit is a state commit and the seq of the audit entry that made it.
type Commit struct {
	Hash string `json:"hash"`
	Seq  uint64 `json:"seq"`
}

// Header is a receipt's first line.
type Header struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
	Run     string `json:"run"`
	Agent   string `json:"agent"`
	// Spawn and Exit are the seqs of the run's run.spawn and run.exit.
	Spawn uint64 `json:"spawn"`
	Exit  uint64 `json:"exit"`
	// Log is the BLAKE3 digest of the run's log, which its run.exit names.
	Log string `json:"log"`
	// Dir and Work: the host folder the run worked on, and its patch's
	// digest, which its run.exit names ("" for a run without --work).
	Dir  string `json:"dir,omitempty"`
	Work string `json:"work,omitempty"`
	// Policy is the version of the agent's policy the run started under:
	// the digest of its file, as ox-policy show names it, which the run's
	// record in its log holds ("" for a run recorded without it).
	Policy string `json:"policy,omitempty"`
	// Before and After are the agent's state commits before the run
	// started and after it exited (nil: none, or none yet).
	Before *Commit `json:"before,omitempty"`
	After  *Commit `json:"after,omitempty"`
	// Head is the receipt's last entry.
	Head proto.AuditHead `json:"head"`
}

type runLine struct {
	Type string `json:"type"`
	Line string `json:"line"`
}

// patchLine holds the patch as text, or, when it is not UTF-8 (a text
// file of another encoding), in base64: a JSON string would not keep its
// bytes.
type patchLine struct {
	Type   string  `json:"type"`
	Patch  *string `json:"patch,omitempty"`
	Base64 []byte  `json:"base64,omitempty"`
}

// Digest is the hex BLAKE3 digest of b.
func Digest(b []byte) string {
	h := blake3.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Lines are the lines of a receipt of h, the run's log lines log (no
// newlines), its patch (nil: none) and the audit lines entries (as the
// log holds them).
func Lines(h Header, log [][]byte, patch []byte, entries [][]byte) ([][]byte, error) {
	h.Type, h.Version = TypeHeader, Version
	h.Head.Type = proto.RecordAuditHead
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := [][]byte{b}
	for _, l := range log {
		b, err := json.Marshal(runLine{Type: TypeRun, Line: string(l)})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if patch != nil {
		text := string(patch)
		pl := patchLine{Type: TypePatch, Patch: &text}
		if !utf8.Valid(patch) {
			pl = patchLine{Type: TypePatch, Base64: patch}
		}
		b, err := json.Marshal(pl)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return append(out, entries...), nil
}

// Result is what Verify found.
type Result struct {
	OK    bool   `json:"ok"`
	Run   string `json:"run,omitempty"`
	Agent string `json:"agent,omitempty"`
	// Policy is the digest of the policy the run started under.
	Policy string `json:"policy,omitempty"`
	// Entries is how many audit entries the receipt holds, Head its last.
	Entries uint64          `json:"entries"`
	Head    proto.AuditHead `json:"head"`
	// Against is the head kept elsewhere it was checked against (nil:
	// none: the receipt then proves only that it is whole).
	Against *proto.AuditHead `json:"against,omitempty"`
	// Part names what does not match: header, run log, patch, audit
	// entry N, commit before, commit after, head; Problem says how.
	Part    string `json:"part,omitempty"`
	Problem string `json:"problem,omitempty"`
}

func (r *Result) fail(part, format string, args ...any) Result {
	r.OK, r.Part, r.Problem = false, part, fmt.Sprintf(format, args...)
	return *r
}

// entry is what Verify reads of an audit line.
type entry struct {
	Seq    uint64 `json:"seq"`
	Op     string `json:"op"`
	Target string `json:"target"`
	Args   string `json:"args"`
}

// Verify checks the receipt read from r, against head when not nil (a
// head kept elsewhere: its entry must be in the receipt, with its hash).
// A receipt that does not verify is a Result with Part and Problem; the
// error is for a receipt that cannot be read at all.
func Verify(r io.Reader, head *proto.AuditHead) (Result, error) {
	var res Result
	br := bufio.NewReaderSize(r, 1<<16)
	var h Header
	var log [][]byte
	var patch []byte
	hasPatch := false
	var lines [][]byte
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return res, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if n == 1 {
			if json.Unmarshal(line, &h) != nil || h.Type != TypeHeader {
				return res.fail("header", "line 1 is not a receipt's header"), nil
			}
			if h.Version != Version {
				return res.fail("header", "version %d: this ox-receipt reads version %d", h.Version, Version), nil
			}
			res.Run, res.Agent = h.Run, h.Agent
			continue
		}
		if audit.LineSeq(line) > 0 {
			lines = append(lines, line)
			continue
		}
		if len(lines) > 0 {
			return res.fail("audit entry", "line %d: not an audit entry among the entries", n), nil
		}
		var t struct {
			Type   string  `json:"type"`
			Line   *string `json:"line"`
			Patch  *string `json:"patch"`
			Base64 []byte  `json:"base64"`
		}
		if err := json.Unmarshal(line, &t); err != nil {
			return res.fail("receipt", "line %d: %v", n, err), nil
		}
		switch {
		case t.Type == TypeRun && t.Line != nil:
			log = append(log, []byte(*t.Line))
		case t.Type == TypePatch && t.Patch != nil && !hasPatch:
			patch, hasPatch = []byte(*t.Patch), true
		case t.Type == TypePatch && t.Base64 != nil && !hasPatch:
			patch, hasPatch = t.Base64, true
		default:
			return res.fail("receipt", "line %d: a %q line where a run log line, the patch or an audit entry goes", n, t.Type), nil
		}
	}
	if h.Type == "" {
		return res.fail("header", "the receipt is empty"), nil
	}

	// The chain: consecutive entries, each as it was written.
	links, bad, why := audit.Links(lines)
	if bad >= 0 {
		seq := audit.LineSeq(lines[bad])
		return res.fail(fmt.Sprintf("audit entry %d", seq), "%s (a changed byte, or an entry dropped, inserted or reordered)", why), nil
	}
	if len(links) == 0 {
		return res.fail("audit entry", "the receipt holds no audit entries"), nil
	}
	first, last := links[0], links[len(links)-1]
	res.Entries = uint64(len(links))
	res.Head = proto.AuditHead{Type: proto.RecordAuditHead, Seq: last.Seq, Hash: last.Hash}
	if h.Head.Seq != last.Seq || h.Head.Hash != last.Hash {
		return res.fail("header", "its head (entry %d %.16s) is not the receipt's last entry (%d %.16s)", h.Head.Seq, h.Head.Hash, last.Seq, last.Hash), nil
	}
	at := func(seq uint64) (*entry, bool) {
		if seq < first.Seq || seq > last.Seq {
			return nil, false
		}
		var e entry
		if json.Unmarshal(lines[seq-first.Seq], &e) != nil {
			return nil, false
		}
		return &e, true
	}

	// The run's own entries.
	name := h.Agent + ":" + h.Run
	spawn, ok := at(h.Spawn)
	if !ok || spawn.Op != proto.OpRunSpawn || spawn.Target != name {
		return res.fail(fmt.Sprintf("audit entry %d", h.Spawn), "not the spawn of run %s of agent %s (%s): the entries are not this run's", h.Run, h.Agent, describe(spawn)), nil
	}
	exit, ok := at(h.Exit)
	if !ok || exit.Op != proto.OpRunExit || !strings.HasPrefix(exit.Target, name+" ") || h.Exit < h.Spawn {
		return res.fail(fmt.Sprintf("audit entry %d", h.Exit), "not the exit of run %s of agent %s (%s): the entries are not this run's", h.Run, h.Agent, describe(exit)), nil
	}

	// The run's log, which its exit entry names.
	var sum = blake3.New(32, nil)
	for _, l := range log {
		sum.Write(l)
		sum.Write([]byte("\n"))
	}
	got := hex.EncodeToString(sum.Sum(nil))
	if got != exit.Args {
		return res.fail("run log", "its digest %.16s is not the one its exit entry %d names (%.16s): a line changed, dropped or added", got, h.Exit, exit.Args), nil
	}
	if h.Log != got {
		return res.fail("header", "its log digest %.16s is not the run log's (%.16s)", h.Log, got), nil
	}
	var rec proto.RunRecord
	if len(log) == 0 || json.Unmarshal(log[0], &rec) != nil || rec.Type != proto.RecordRun {
		return res.fail("run log", "its first line is not the run's record"), nil
	}
	if rec.ID != h.Run || rec.Agent != h.Agent || rec.Work != h.Dir {
		return res.fail("header", "run %s of agent %s on %q, the run log's record says run %s of agent %s on %q", h.Run, h.Agent, h.Dir, rec.ID, rec.Agent, rec.Work), nil
	}
	if rec.Policy != h.Policy {
		return res.fail("header", "its policy version %q is not the one the run log's record names (%q)", h.Policy, rec.Policy), nil
	}
	res.Policy = h.Policy

	// The work's patch, which the exit entry names too.
	_, named, _ := strings.Cut(exit.Target, " work ")
	if named != "" {
		named, _, _ = strings.Cut(named, " ")
	}
	if named != h.Work {
		return res.fail("header", "its work digest %q is not the one its exit entry names (%q)", h.Work, named), nil
	}
	if h.Work != "" {
		if !hasPatch {
			return res.fail("patch", "missing: the run worked on %s, its exit entry names patch %.16s", h.Dir, h.Work), nil
		}
		if d := Digest(patch); d != h.Work {
			return res.fail("patch", "its digest %.16s is not the one the exit entry names (%.16s): the patch changed", d, h.Work), nil
		}
	} else if hasPatch {
		return res.fail("patch", "a patch, and the exit entry names none"), nil
	}

	// The state commits around the run.
	for _, c := range []struct {
		part string
		c    *Commit
		ok   func(seq uint64) bool
	}{{"commit before", h.Before, func(s uint64) bool { return s < h.Spawn }}, {"commit after", h.After, func(s uint64) bool { return s > h.Exit }}} {
		if c.c == nil {
			continue
		}
		e, ok := at(c.c.Seq)
		if !ok || e.Op != proto.OpCommit || !strings.HasSuffix(e.Target, ":"+c.c.Hash) || !c.ok(c.c.Seq) {
			return res.fail(c.part, "commit %.12s: entry %d is not its commit (%s)", c.c.Hash, c.c.Seq, describe(e)), nil
		}
	}

	// Bound to a head kept elsewhere.
	if head != nil {
		res.Against = head
		switch {
		case head.Seq > last.Seq:
			return res.fail("head", "the head given (entry %d) is after the receipt's last entry (%d): make the receipt after the head was kept", head.Seq, last.Seq), nil
		case head.Seq < h.Exit:
			return res.fail("head", "the head given (entry %d) is before the run's exit (entry %d): it does not bind the run's entries", head.Seq, h.Exit), nil
		case head.Seq < first.Seq:
			return res.fail("head", "the head given (entry %d) is before the receipt's first entry (%d)", head.Seq, first.Seq), nil
		}
		if l := links[head.Seq-first.Seq]; l.Hash != head.Hash {
			return res.fail("head", "entry %d of the receipt has hash %.16s, the head given %.16s: these entries are not the log that head was taken of", head.Seq, l.Hash, head.Hash), nil
		}
	}
	res.OK = true
	return res, nil
}

func describe(e *entry) string {
	if e == nil {
		return "no such entry in the receipt"
	}
	return fmt.Sprintf("entry %d is %s %s", e.Seq, e.Op, e.Target)
}

// ReadHead reads a head kept elsewhere: the last audit_head record of r
// (ox-audit head's output, an export's last line, a witness record).
func ReadHead(r io.Reader) (*proto.AuditHead, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), audit.MaxLineBytes)
	var head *proto.AuditHead
	for sc.Scan() {
		var h proto.AuditHead
		if json.Unmarshal(sc.Bytes(), &h) == nil && h.Type == proto.RecordAuditHead && h.Hash != "" {
			head = &h
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if head == nil {
		return nil, errors.New("no audit_head record in it (ox-audit head prints one; an export ends with one)")
	}
	return head, nil
}
