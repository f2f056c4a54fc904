package kernel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched/jobs"
)

// TestEveryOpDeclared: each op named in package proto is in the syscall
// table, so that a new op cannot be served, replayed or named as an
// event by a list that forgot it.
func TestEveryOpDeclared(t *testing.T) {
	files, err := filepath.Glob("../proto/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("proto sources: %v", err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(x ast.Node) bool {
			vs, ok := x.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Op") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				op, _ := strconv.Unquote(lit.Value)
				n++
				if Lookup(op) == nil {
					t.Errorf("proto.%s (%q) is not in the syscall table", name.Name, op)
				}
			}
			return true
		})
	}
	if n < 40 {
		t.Fatalf("found only %d ops in package proto: the scan is broken", n)
	}
}

// TestSyscallTable holds the declarations to what they promise.
func TestSyscallTable(t *testing.T) {
	for _, sc := range Syscalls() {
		if sc.Op == "" {
			t.Errorf("a declaration without its op: %+v", sc)
		}
		if (sc.Dirties != nil || sc.Event != "") && !sc.Mutates {
			t.Errorf("%s changes the tree or publishes an event but is not declared Mutates", sc.Op)
		}
		if sc.Inline && sc.Mutates {
			t.Errorf("%s waits for a commit: it cannot run inline on the reading goroutine", sc.Op)
		}
		if sc.Key != proto.KeyNone && sc.Recorded {
			t.Errorf("%s checks a key but is not served", sc.Op)
		}
	}
	if Lookup("no.such.op") != nil {
		t.Fatal("Lookup found an op that is not declared")
	}
}

// TestReplayDirties: an entry replayed from the journal marks what its op
// changed (policy.set was once missing from the hand-kept list, so a crash
// lost the policy change from the next commit).
func TestReplayDirties(t *testing.T) {
	for op, want := range map[string]string{
		proto.OpStateSave:    "agents/ops/state/notes/a.md",
		proto.OpStateDelete:  "agents/ops/state/notes/a.md",
		proto.OpMemRemember:  "agents/ops/mem/notes/a.md",
		proto.OpMemForget:    "agents/ops/mem/notes/a.md",
		proto.OpPolicySet:    "agents/ops/sys/" + sysPolicy,
		proto.OpAgentCreate:  "agents/ops/sys/" + sysPolicy,
		proto.OpBudgetCharge: "agents/ops/sys/" + sysBudget,
		proto.OpRunExit:      "agents/ops/sys/" + sysBudget,
		proto.OpScheduleFire: "agents/ops/sys/" + jobs.Key("notes"),
	} {
		sc := Lookup(op)
		if sc == nil || sc.Dirties == nil {
			t.Errorf("%s marks nothing on replay", op)
			continue
		}
		tgt := "ops:notes/a.md"
		if op == proto.OpScheduleFire {
			tgt = "ops:notes run r1"
		}
		if got := sc.Dirties(&audit.Entry{Op: op, Target: tgt, Result: "ok"}); got != want {
			t.Errorf("%s: marks %q, want %q", op, got, want)
		}
	}
	// A refused save changed nothing.
	if got := Lookup(proto.OpStateSave).Dirties(&audit.Entry{Target: "ops:k", Result: proto.EPERM}); got != "" {
		t.Errorf("a refused save marks %q", got)
	}
}

func TestEventNames(t *testing.T) {
	for _, c := range []struct{ op, result, want string }{
		{proto.OpStateSave, "ok", proto.EventStateChanged},
		{proto.OpStateSave, proto.EPERM, proto.EventPolicyDenied},
		{proto.OpStateSave, proto.EINVAL, proto.OpStateSave},
		{proto.OpMemForget, "ok", proto.EventMemoryForgotten},
		{proto.OpRunExit, "ok", proto.EventRunExited},
		{proto.OpScheduleFire, "ok", proto.EventScheduleFired},
		{proto.OpBudgetCharge, proto.EDQUOT, proto.EventBudgetExceeded},
		{proto.OpStateLoad, "ok", proto.OpStateLoad},
		{"unknown.op", "ok", "unknown.op"},
	} {
		if got := eventName(c.op, c.result); got != c.want {
			t.Errorf("eventName(%s, %s) = %s, want %s", c.op, c.result, got, c.want)
		}
	}
}

// TestDefinitions holds each definition to its shape: its work is unary
// or streamed, not both; it runs the gate (a Subject) or says why its
// work gates itself; the policy question its Subject asks is the one
// the declaration names (and the dry run asks).
func TestDefinitions(t *testing.T) {
	n := 0
	for _, sc := range Syscalls() {
		d := DefOf(sc.Op)
		if d == nil {
			continue
		}
		n++
		if d.Decl() != sc {
			t.Errorf("%s: the table's declaration is not its definition's", sc.Op)
		}
		if do, each := d.works(); do == each {
			t.Errorf("%s: Do %v, Each %v: want exactly one", sc.Op, do, each)
		}
		gated, why := d.gated()
		if gated == (why != "") {
			t.Errorf("%s: a Subject %v, Gates %q: want a Subject, or the reason its work gates itself", sc.Op, gated, why)
		}
		if q := d.probe().policy; q != askNone && q != sc.Asks {
			t.Errorf("%s: its Subject asks %v, its declaration %v", sc.Op, q, sc.Asks)
		}
		if d.probe().op != "" || d.probe().sc != nil {
			t.Errorf("%s: its Subject names an op: the dispatcher names it", sc.Op)
		}
	}
	if n < 50 {
		t.Fatalf("only %d definitions: the table is broken", n)
	}
}

// handGated are the functions of the package that enter the gate
// themselves, besides the dispatcher: the work of a definition whose
// Gates says why, and the mount's own checks (fsview.go and its kin),
// which are not calls of one op. A Do or Each that gated would be found
// here (TestOnlyTheDispatcherGates).
var handGated = map[string]string{
	"enter":         "the dispatcher (def.go)",
	"gate":          "the gate of a call passed by value (gate.go)",
	"lookup":        proto.OpRunAttach + ", " + proto.OpRunWait + ", " + proto.OpRunKill,
	"run":           "lookup",
	"spawn":         proto.OpRunSpawn,
	"runReceipt":    proto.OpRunReceipt,
	"jobGate":       "schedule.rm, schedule.run, schedule.enable",
	"workOf":        "work.diff, work.apply, work.discard",
	"fork":          proto.OpAgentFork,
	"agentDiff":     proto.OpAgentDiff,
	"msgCheck":      proto.OpMsgSend,
	"approveDecide": proto.OpApproveDecide,
	"MayWrite":      "the mount: a file opened for writing",
	"submitChange":  "the mount: a file's save or removal",
	"StateStat":     "the mount: a file's attributes",
	"MsgRead":       "the mount: a message's file",
	"ApprovalRead":  "the mount: an approval's file",
}

// TestOnlyTheDispatcherGates: no function of the package calls the gate
// but the dispatcher and the hand-gated ones above, so a definition's
// work cannot gate by habit (under the wrong op, or twice).
func TestOnlyTheDispatcherGates(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range af.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(x ast.Node) bool {
				ce, ok := x.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := ce.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "gate" || sel.Sel.Name == "gateCall") {
					name := fd.Name.Name
					seen[name] = true
					if _, ok := handGated[name]; !ok {
						t.Errorf("%s (%s) calls the gate: a definition's Subject says what the dispatcher gates", name, fset.Position(ce.Pos()))
					}
				}
				return true
			})
		}
	}
	for name := range handGated {
		if !seen[name] {
			t.Errorf("%s is listed as gating itself and does not: take it off handGated", name)
		}
	}
}
