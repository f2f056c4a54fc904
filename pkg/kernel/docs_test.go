package kernel

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// manSection is the text of oxios(7) from the heading head to the next
// heading of its level or above.
func manSection(t *testing.T, head string) string {
	t.Helper()
	b, err := os.ReadFile("../../man/oxios.7.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+head+"\n")
	if i < 0 {
		t.Fatalf("oxios(7) has no %q", head)
	}
	s = s[i+len(head)+2:]
	level := head[:strings.IndexByte(head, ' ')+1]
	for _, h := range []string{"\n# ", "\n" + level} {
		if j := strings.Index(s, h); j >= 0 {
			s = s[:j]
		}
	}
	return s
}

var opRow = regexp.MustCompile(`(?m)^\| ([a-z]+(?:\.[a-z]+)?) \|(.*)\|(.*)\|$`)

// TestManOpTable: the tables of ops in oxios(7) (Wire protocol) list
// every op a front end serves, once, and no other, each row as its
// definition documents it: its args and its result (Def.Args, Def.Result).
func TestManOpTable(t *testing.T) {
	text := manSection(t, "### Wire protocol")
	seen := map[string]bool{}
	n := 0
	for _, m := range opRow.FindAllStringSubmatch(text, -1) {
		op := m[1]
		if op == "op" {
			continue
		}
		n++
		sc := Lookup(op)
		switch {
		case seen[op]:
			t.Errorf("oxios(7) lists %s twice", op)
		case sc == nil:
			t.Errorf("oxios(7) lists %s, which is not in the syscall table", op)
		case sc.Recorded:
			t.Errorf("oxios(7) lists %s, which no front end serves", op)
		default:
			args, result := DefOf(op).docs()
			row := "| " + op + " | " + args + " | " + result + " |"
			if args == "" {
				row = "| " + op + " | | " + result + " |"
			}
			if m[0] != row {
				t.Errorf("oxios(7)'s row of %s is\n\t%s\nits definition (syscalls.go) says\n\t%s", op, m[0], row)
			}
		}
		seen[op] = true
	}
	if n < 50 {
		t.Fatalf("only %d ops in the tables of oxios(7): the scan is broken", n)
	}
	for _, sc := range Syscalls() {
		if !sc.Recorded && !seen[sc.Op] {
			t.Errorf("%s is served, and not in the tables of ops of oxios(7)", sc.Op)
		}
	}
}

// TestManExistingOps: the paragraph of oxios(7) that lists the ops
// answering ENOENT for an agent that does not exist lists those declared
// Existing, and only those.
func TestManExistingOps(t *testing.T) {
	text := manSection(t, "### Wire protocol")
	i := strings.Index(text, "A request that reads an agent that does not exist")
	if i < 0 {
		t.Fatal("oxios(7) does not say which ops need an agent that exists")
	}
	para, _, _ := strings.Cut(text[i:], "\n\n")
	para, _, _ = strings.Cut(para, " is answered ")
	var doc []string
	for _, m := range regexp.MustCompile(`\*\*([a-z.]+)\*\*`).FindAllStringSubmatch(para, -1) {
		doc = append(doc, m[1])
	}
	var want []string
	for _, sc := range Syscalls() {
		if sc.Existing {
			want = append(want, sc.Op)
		}
	}
	slices.Sort(doc)
	slices.Sort(want)
	if !slices.Equal(doc, want) {
		t.Errorf("oxios(7) says these ops need an agent that exists:\n%v\nthe table declares\n%v", doc, want)
	}
}

// TestFleetCallable: the ops a fleet call may carry are those the table
// declares Fleet.
func TestFleetCallable(t *testing.T) {
	n := 0
	for _, sc := range Syscalls() {
		if sc.Fleet != proto.FleetCallable[sc.Op] {
			t.Errorf("%s: declared Fleet %v, proto.FleetCallable says %v", sc.Op, sc.Fleet, proto.FleetCallable[sc.Op])
		}
		if sc.Fleet {
			n++
			if sc.Recorded {
				t.Errorf("%s travels in the fleet, and no front end serves it", sc.Op)
			}
		}
	}
	if n != len(proto.FleetCallable) {
		t.Errorf("proto.FleetCallable has %d ops, the table %d", len(proto.FleetCallable), n)
	}
}
