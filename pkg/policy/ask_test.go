package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

func TestAsk(t *testing.T) {
	p, err := Parse([]byte(`
[exec]
allow = ["ls", "rm", "env"]
[state]
read = ["**"]
write = ["notes/**"]
quota = "1KiB"
[tools]
allow = ["jsonq"]
[net]
allow = ["example.org"]
[ask]
exec = ["rm", "curl"]
state = ["prod/**", "notes/final"]
tools = ["textstat"]
net = ["*.example.com"]
tokens = 1000
timeout = "2s"
default = "allow"
`))
	if err != nil {
		t.Fatal(err)
	}
	var a *Asked
	var d *Denied
	// exec: on ask (also on allow) asks, with the command built.
	for _, argv := range [][]string{{"rm", "-f", "x"}, {"curl", "x"}, {"env", "rm", "x"}} {
		cmd, err := p.CheckExec(argv, "")
		if !errors.As(err, &a) || a.Rule != "ask.exec" || len(cmd.Argv) == 0 {
			t.Errorf("exec %v: %v %+v, want ask.exec with the command", argv, err, cmd)
		}
	}
	if _, err := p.CheckExec([]string{"ls"}, ""); err != nil {
		t.Errorf("ls: %v", err)
	}
	// Asking never widens the other refusals.
	if _, err := p.CheckExec([]string{"rm", "a;b"}, ""); !errors.As(err, &d) || d.Rule != "exec.shell" {
		t.Errorf("rm with a metacharacter: %v, want exec.shell", err)
	}
	if _, err := p.CheckExec([]string{"cat", "x"}, ""); !errors.As(err, &d) {
		t.Errorf("cat: %v, want denied", err)
	}
	// state: ask.state grants the key once approved; quota still binds.
	if err := p.CheckStateWrite("prod/db", 10); !errors.As(err, &a) || a.Rule != "ask.state" {
		t.Errorf("prod/db: %v", err)
	}
	if err := p.CheckStateWrite("notes/final", 10); !errors.As(err, &a) {
		t.Errorf("notes/final: %v", err)
	}
	if err := p.CheckStateWrite("notes/a", 10); err != nil {
		t.Errorf("notes/a: %v", err)
	}
	if err := p.CheckStateWrite("prod/db", 5000); !errors.As(err, &d) || d.Rule != "state.quota" {
		t.Errorf("prod/db over quota: %v", err)
	}
	if err := p.CheckStateWrite("other", 1); !errors.As(err, &d) {
		t.Errorf("other: %v", err)
	}
	// tools, hosts.
	if err := p.CheckTool("textstat"); !errors.As(err, &a) || a.Rule != "ask.tools" {
		t.Errorf("textstat: %v", err)
	}
	if err := p.CheckTool("jsonq"); err != nil {
		t.Errorf("jsonq: %v", err)
	}
	if err := p.CheckHost("api.example.com"); !errors.As(err, &a) || a.Rule != "ask.net" {
		t.Errorf("api.example.com: %v", err)
	}
	if err := p.CheckHost("example.org"); err != nil {
		t.Errorf("example.org: %v", err)
	}
	if err := p.CheckHost("evil.org"); !errors.As(err, &d) {
		t.Errorf("evil.org: %v", err)
	}
	// budget.
	if p.CheckBudgetAsk(999, 0) != nil {
		t.Error("999 tokens asked")
	}
	if err := p.CheckBudgetAsk(1000, 0); !errors.As(err, &a) || a.Rule != "ask.tokens" {
		t.Errorf("1000 tokens: %v", err)
	}
	if p.AskTimeout() != 2*time.Second || !p.AskAllows() {
		t.Errorf("timeout %v allows %v", p.AskTimeout(), p.AskAllows())
	}
	// An Asked is an error: a caller that cannot wait refuses.
	if !strings.Contains(a.Error(), "needs approval") {
		t.Error(a.Error())
	}
}

func TestAskDefaultsAndErrors(t *testing.T) {
	p, err := Parse([]byte("[exec]\nallow = [\"ls\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.AskTimeout() != DefaultAskTimeout || p.AskAllows() {
		t.Error("defaults: 5m, deny")
	}
	if p.CheckSend("b") == nil {
		t.Error("a policy without [msg] sends")
	}
	for _, c := range []struct{ text, want string }{
		{"[ask]\nexec = [\"./rm\"]\n", "ask.exec"},
		{"[ask]\nstate = [\"/x\"]\n", "ask.state"},
		{"[ask]\ndefault = \"maybe\"\n", "ask.default"},
		{"[ask]\ntokens = -1\n", "negative"},
		{"[ask]\nnet = [\"a b\"]\n", "ask.net"},
		{"[msg]\nsend = [\"a/b\"]\n", "msg.send"},
		{"[msg]\naccept = [\"[\"]\n", "msg.accept"},
	} {
		if _, err := Parse([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

func TestMsgRules(t *testing.T) {
	p, err := Parse([]byte("[msg]\nsend = [\"review-*\"]\naccept = [\"ops\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.CheckSend("review-1") != nil || p.CheckSend("ops") == nil {
		t.Error("send")
	}
	if p.CheckAccept("ops") != nil || p.CheckAccept("evil") == nil || p.CheckAccept("") != nil {
		t.Error("accept")
	}
	d := Default()
	if d.CheckSend("x") != nil || d.CheckAccept("y") != nil {
		t.Error("the default policy lets agents talk")
	}
	if len(d.Ask.Exec) != 0 || d.Ask.Default != AskDeny {
		t.Error("the default policy asks nothing")
	}
}

func TestCheckMessage(t *testing.T) {
	pols := map[string]string{
		"ops":      "[msg]\nsend = [\"review-*\"]\naccept = [\"review-*\"]\n",
		"review-1": "[msg]\nsend = [\"ops\"]\naccept = [\"web\"]\n",
	}
	var read []string
	policyOf := func(agent string) (*Policy, error) {
		read = append(read, agent)
		text, ok := pols[agent]
		if !ok {
			return nil, errors.New("no policy")
		}
		return Parse([]byte(text))
	}
	check := func(from, to, wantRule, wantMsg string, wantRead ...string) {
		t.Helper()
		read = nil
		rule, err := CheckMessage(from, to, policyOf)
		if rule != wantRule || (wantMsg == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantMsg)) || strings.Join(read, ",") != strings.Join(wantRead, ",") {
			t.Errorf("%s -> %s: %q %v (read %v)", from, to, rule, err, read)
		}
		if rule != "" && proto.AsError(err).Code != proto.EPERM {
			t.Errorf("%s -> %s: a refusal is %v", from, to, err)
		}
	}
	check("review-1", "ops", "", "", "review-1", "ops")
	// The sender's refusal comes first: the recipient's policy is not read.
	check("ops", "web", "msg.send", "ops: ", "ops")
	check("ops", "review-1", "msg.accept", "review-1: ", "ops", "review-1")
	check("web", "ops", "", "no policy", "web")
	check("review-1", "ops", "", "", "review-1", "ops")
}

func TestGranting(t *testing.T) {
	p, err := Parse([]byte("[exec]\nallow = [\"ls\"]\n[net]\nallow = []\n[tools]\nallow = []\n[ask]\nexec = [\"rm\"]\nnet = [\"h.example\"]\ntools = [\"t\"]\nstate = [\"p/**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := p.Granting()
	if _, err := g.CheckExec([]string{"rm", "x"}, ""); err != nil {
		t.Error(err)
	}
	if g.CheckHost("h.example") != nil || g.CheckTool("t") != nil || g.CheckStateWrite("p/x", 0) != nil {
		t.Error("granting: an ask rule still asks")
	}
	if AsAsked(p.CheckHost("h.example")) == nil {
		t.Error("the original policy changed")
	}
	if _, err := g.CheckExec([]string{"cat"}, ""); err == nil {
		t.Error("granting widened beyond the ask rules")
	}
}
