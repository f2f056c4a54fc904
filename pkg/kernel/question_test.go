package kernel

import (
	"context"
	"slices"
	"testing"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/policy/judge"
	"github.com/oxios/oxios/pkg/proto"
)

const proposed = "[state]\nread = [\"**\"]\nwrite = [\"notes/**\"]\n[memory]\nkinds = [\"episodic\"]\n[exec]\nallow = [\"echo\", \"rm\"]\n"

func noUsage(agent, key string) (int64, int64) { return 0, 0 }

func TestDryRun(t *testing.T) {
	p, err := judge.Proposed(proposed)
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
		{proto.OpExec, []string{"--", "echo"}, ""},
		// What the call asks, not a look-alike: a list asks whether
		// anything is readable, a recall whether the kind is given.
		{proto.OpStateList, nil, ""},
		{proto.OpMemRecall, nil, ""},
		{proto.OpMemRecall, []string{"semantic"}, "memory.kinds"},
		// An op that asks nothing of a policy is allowed; one that is the
		// admin's is refused to a run.
		{proto.OpAgentShow, nil, ""},
		{proto.OpPolicySet, nil, "admin"},
	} {
		_, d, err := dryRun(p, noUsage, nil, &Cred{Agent: "ops", Run: "r1"}, "ops", c.op, c.args)
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
	if _, _, err := dryRun(p, noUsage, nil, &Cred{Agent: "ops", Run: "r1"}, "ops", "explode", nil); err == nil {
		t.Error("an unknown op was judged")
	}
	if _, _, err := dryRun(p, noUsage, nil, &Cred{Agent: "ops", Run: "r1"}, "ops", proto.OpExec, nil); err == nil {
		t.Error("exec without a command was judged")
	}
	if _, err := judge.Proposed("[signals]\non_violation = \"explode\"\n"); err == nil {
		t.Error("a policy that does not parse was taken")
	}
}

func TestReplayDryRun(t *testing.T) {
	p, _ := judge.Proposed(proposed)
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
	res, err := judge.Replay(context.Background(), p, func(p *policy.Policy, agent, op string, args []string) (*policy.Denied, error) {
		_, d, err := dryRun(p, noUsage, nil, &Cred{Agent: agent, Run: "r1"}, agent, op, args)
		return d, err
	}, "ops", entries, func(r *proto.PolicyTestRecord) error {
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
	if _, err := judge.Replay(context.Background(), p, func(p *policy.Policy, agent, op string, args []string) (*policy.Denied, error) {
		_, d, err := dryRun(p, noUsage, nil, &Cred{Agent: agent, Run: "r1"}, agent, op, args)
		return d, err
	}, "ops", []string{"not json"}, nil); err == nil {
		t.Error("a line that is not JSON was taken")
	}
}

// TestDryRunAgrees: ox-policy check answers what the call itself answers,
// for the calls the issue found them disagreeing on (a list of the state
// under read = ["notes/**"]; a recall under kinds = ["semantic"]) and
// for others: the verdict of the real call by a run of the agent equals
// the dry run's, and a refusal is audited under the op called.
func TestDryRunAgrees(t *testing.T) {
	k := testKernel(t, t.TempDir(), nil)
	defer k.Close()
	ctx := context.Background()
	admin := &Cred{Admin: true}
	run := &Cred{UID: 1000, PID: 7, Agent: "ops", Run: "r1"}
	pol := "[state]\nread = [\"notes/**\"]\nwrite = [\"notes/**\"]\n[memory]\nkinds = [\"semantic\"]\n"
	if _, err := k.PolicySet(ctx, admin, proto.PolicySetArgs{Agent: "ops", Text: pol}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "ops", Key: "notes/a", Value: "v"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := k.MemRemember(ctx, admin, proto.MemRememberArgs{Agent: "ops", Memories: []proto.MemoryInput{{Kind: "semantic", Text: "the sky is blue"}}}, nil); err != nil {
		t.Fatal(err)
	}
	none := func(*proto.MemoryRecord) error { return nil }
	for _, c := range []struct {
		op   string
		args []string
		call func() error
	}{
		{proto.OpStateList, nil, func() error {
			return k.StateList(ctx, run, proto.StateListArgs{Agent: "ops"}, nil, func(*proto.StateRecord) error { return nil })
		}},
		{proto.OpMemRecall, nil, func() error {
			return k.MemRecall(ctx, run, proto.MemRecallArgs{Agent: "ops", Query: "sky"}, nil, none)
		}},
		{proto.OpMemRecall, []string{"episodic"}, func() error {
			return k.MemRecall(ctx, run, proto.MemRecallArgs{Agent: "ops", Query: "sky", Kind: "episodic"}, nil, none)
		}},
		{proto.OpStateLoad, []string{"notes/a"}, func() error {
			_, _, err := k.StateLoad(ctx, run, proto.StateArgs{Agent: "ops", Key: "notes/a"}, nil)
			return err
		}},
		{proto.OpStateLoad, []string{"etc/b"}, func() error {
			_, _, err := k.StateLoad(ctx, run, proto.StateArgs{Agent: "ops", Key: "etc/b"}, nil)
			return err
		}},
		{proto.OpStateSave, []string{"etc/b"}, func() error {
			_, err := k.StateSave(ctx, run, proto.StateSaveArgs{Agent: "ops", Key: "etc/b", Value: "x"}, nil)
			return err
		}},
		{proto.OpPolicySet, nil, func() error {
			_, err := k.PolicySet(ctx, run, proto.PolicySetArgs{Agent: "ops", Text: pol}, nil)
			return err
		}},
	} {
		rec, err := k.PolicyCheck(ctx, run, proto.PolicyCheckArgs{Agent: "ops", Op: c.op, Args: c.args}, nil)
		if err != nil {
			t.Fatalf("%s %v: check: %v", c.op, c.args, err)
		}
		real := c.call()
		if rerr := code(real); rerr == proto.ENOENT {
			real = nil // allowed, and not there
		}
		if rec.Allowed != (real == nil) {
			t.Errorf("%s %v: ox-policy check says allowed=%v (%s), the call says %v", c.op, c.args, rec.Allowed, rec.Text, real)
		}
	}
}
