package judge

import (
	"errors"
	"slices"
	"testing"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

func TestFill(t *testing.T) {
	rec := proto.PolicyCheckRecord{Op: "exec", Args: []string{"wc"}}
	Fill(&rec, nil)
	if !rec.Allowed || rec.Text != "exec wc: allowed" {
		t.Errorf("allowed: %+v", rec)
	}
	rec = proto.PolicyCheckRecord{Op: "exec", Args: []string{"wc"}}
	Fill(&rec, &policy.Denied{Rule: "exec.allow", Reason: "no"})
	if rec.Allowed || rec.Ask || rec.Rule != "exec.allow" || rec.Text != "exec wc: refused by exec.allow: no" {
		t.Errorf("refused: %+v", rec)
	}
	rec = proto.PolicyCheckRecord{Op: "exec", Args: []string{"wc"}}
	Fill(&rec, &policy.Denied{Rule: "ask.exec", Reason: "ask"})
	if rec.Allowed || !rec.Ask || rec.Text != "exec wc: asks an operator first (ask.exec): ask" {
		t.Errorf("ask: %+v", rec)
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.org/x":        "example.org",
		"http://u:p@example.org:8080/": "example.org",
		"http://[::1]:80/":             "[::1]",
		"example.org":                  "example.org",
		"example.org:443":              "example.org",
	} {
		if got := HostOf(in); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUnquote(t *testing.T) {
	for in, want := range map[string][]string{
		`echo hi`:      {"echo", "hi"},
		`echo "a b" c`: {"echo", "a b", "c"},
		`  sh "x\"y"`:  {"sh", `x"y`},
		``:             nil,
	} {
		got, ok := unquote(in)
		if !ok || !slices.Equal(got, want) {
			t.Errorf("unquote(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	if _, ok := unquote(`echo "open`); ok {
		t.Error("an open quote was taken")
	}
}

func TestCheck(t *testing.T) {
	// The judging is the kernel's (pkg/kernel TestDryRun): here, an exec
	// judged by exec.allow alone.
	none := func(p *policy.Policy, agent, op string, args []string) (*policy.Denied, error) {
		if op != "exec" {
			return nil, proto.Errorf(proto.EINVAL, "op %q", op)
		}
		_, err := p.CheckExec(args, "")
		d, _ := err.(*policy.Denied)
		return d, nil
	}
	own := func(agent string) (*policy.Policy, error) {
		return policy.Parse([]byte("[exec]\nallow = [\"ls\"]\n"))
	}
	rec, err := Check(proto.PolicyCheckArgs{Agent: "a", Op: "exec", Args: []string{"ls"}}, own, none)
	if err != nil || !rec.Allowed || rec.Type != proto.RecordPolicyCheck || rec.Agent != "a" {
		t.Fatalf("%+v %v", rec, err)
	}
	// A proposed policy is judged instead of the agent's own.
	rec, err = Check(proto.PolicyCheckArgs{Agent: "a", Op: "exec", Args: []string{"ls"}, Policy: "[exec]\nallow = []\n"}, own, none)
	if err != nil || rec.Allowed || rec.Rule == "" {
		t.Fatalf("%+v %v", rec, err)
	}
	if _, err := Check(proto.PolicyCheckArgs{Agent: "a", Op: "exec", Policy: "[[["}, own, none); err == nil {
		t.Fatal("a proposed policy that does not parse")
	}
	boom := errors.New("unreadable")
	if _, err := Check(proto.PolicyCheckArgs{Agent: "a", Op: "exec"}, func(string) (*policy.Policy, error) { return nil, boom }, none); err != boom {
		t.Fatal(err)
	}
	if _, err := Check(proto.PolicyCheckArgs{Agent: "a", Op: "nope"}, own, none); err == nil {
		t.Fatal("an op not understood")
	}
}
