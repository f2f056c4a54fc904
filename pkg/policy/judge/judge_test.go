package judge

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

const proposed = "[state]\nread = [\"**\"]\nwrite = [\"notes/**\"]\n[memory]\nkinds = [\"episodic\"]\n[exec]\nallow = [\"echo\", \"rm\"]\n"

func noUsage(agent, key string) (int64, int64) { return 0, 0 }

func TestJudge(t *testing.T) {
	p, err := Proposed(proposed)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op   string
		args []string
		rule string // "" allowed
	}{
		{proto.OpStateSave, []string{"notes/a"}, ""},
		{proto.OpStateSave, []string{"etc/b"}, "state.write"},
		{"write", []string{"etc/b"}, "state.write"},
		{proto.OpMemRemember, []string{"semantic"}, "memory.kinds"},
		{proto.OpMemRemember, []string{"episodic"}, ""},
		{proto.OpExec, []string{"echo", "hi"}, ""},
		{proto.OpExec, []string{"wc", "-c"}, "exec.allow"},
	} {
		d, err := Judge(p, noUsage, "ops", c.op, c.args)
		if err != nil {
			t.Fatalf("%s %v: %v", c.op, c.args, err)
		}
		got := ""
		if d != nil {
			got = d.Rule
		}
		if got != c.rule {
			t.Errorf("%s %v: rule %q, want %q", c.op, c.args, got, c.rule)
		}
	}
	if _, err := Judge(p, noUsage, "ops", "explode", nil); err == nil {
		t.Error("an unknown op was judged")
	}
	if _, err := Judge(p, noUsage, "ops", proto.OpExec, nil); err == nil {
		t.Error("exec without a command was judged")
	}
	if _, err := Proposed("[signals]\non_violation = \"explode\"\n"); err == nil {
		t.Error("a policy that does not parse was taken")
	}
}

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

func TestReplay(t *testing.T) {
	p, _ := Proposed(proposed)
	entries := []string{
		`{"type":"checkpoint","seq":1}`,
		`{"type":"audit","seq":2,"op":"state.save","target":"ops:notes/a","result":"ok"}`,
		`{"type":"audit","seq":3,"op":"state.save","target":"ops:etc/b","result":"ok"}`,
		`{"type":"audit","seq":4,"op":"exec","target":"ops:exec rm -rf /tmp/x [exec.allow]","result":"EPERM"}`,
		`{"type":"audit","seq":5,"op":"state.save","target":"other:etc/b","result":"ok"}`,
		`{"type":"audit","seq":6,"op":"exec","target":"ops:exec wc -c => exit 0","result":"ok"}`,
		`{"type":"audit","seq":7,"op":"state.save","target":"ops:etc/c","result":"EIO"}`,
		`{"type":"audit","seq":8,"op":"run.spawn","target":"ops:r1","result":"ok"}`,
	}
	var got []string
	res, err := Replay(context.Background(), p, noUsage, "ops", entries, func(r *proto.PolicyTestRecord) error {
		got = append(got, r.Target+" "+r.Change+" "+r.Rule)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ops:etc/b refuse state.write", "ops:exec rm -rf /tmp/x [exec.allow] allow ", "ops:exec wc -c => exit 0 refuse exec.allow"}
	if !slices.Equal(got, want) {
		t.Errorf("records:\n%q\nwant\n%q", got, want)
	}
	if res.Judged != 4 || res.Refused != 2 || res.Allowed != 1 || res.Skipped != 4 {
		t.Errorf("result: %+v", res)
	}
	if _, err := Replay(context.Background(), p, noUsage, "ops", []string{"not json"}, nil); err == nil {
		t.Error("a line that is not JSON was taken")
	}
}

func TestCheck(t *testing.T) {
	none := func(agent, key string) (int64, int64) { return 0, 0 }
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
