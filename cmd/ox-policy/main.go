// Command ox-policy shows, sets, checks and tests agents' policies. See
// ox-policy(1).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

// testBatch is how many audit entries go in one policy.test request.
const testBatch = 512

func main() {
	app := cliutil.App("ox-policy", "show, set, check and test an agent's policy")
	app.Version = version
	app.Description = "An agent's policy (oxios-policy(5)) says what its runs may do: which state keys they may read and write, which memory kinds, which programs exec may run, which WASM tools, which hosts, what they may spend and under which limits. The kernel enforces it on every syscall, over the socket and through the mount; what it does not grant is refused with EPERM and audited with the rule that refused it. Only the admin changes a policy."
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{Name: "show", Usage: "print an agent's policy (TOML; --json: the policy record)", Flags: cliutil.ClientFlags(), Action: show},
		{Name: "set", Usage: "replace an agent's policy with FILE (- for stdin), checked first (admin)", ArgsUsage: "FILE", Flags: cliutil.ClientFlags(), Action: set},
		{Name: "check", Usage: "would OP ARGS be allowed for a run of the agent, and by which rule (a dry run)", ArgsUsage: "OP [ARG...]",
			Flags: cliutil.ClientFlags(&cli.StringFlag{Name: "policy", Usage: "judge with the policy in `FILE` instead of the agent's", TakesFile: true}), Action: check},
		{Name: "test", Usage: "replay audit entries (stdin, as ox-audit prints them) against the policy in FILE: which past actions it would refuse, newly allow or hold for approval (ask)", ArgsUsage: "FILE", Flags: cliutil.ClientFlags(), Action: test},
	})
	cliutil.Run(app)
}

func show(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.PolicyShow(c.Context, agent)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		p := cliutil.NewPrinter(c)
		p.Print(rec)
		return p.Flush()
	}
	_, err = io.WriteString(os.Stdout, rec.Text)
	return err
}

// readFile reads FILE, or stdin for "-".
func readFile(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", cliutil.Usagef("give one FILE (- for stdin)")
	}
	name := c.Args().First()
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", cliutil.Failf("%v", err)
	}
	return string(b), nil
}

func set(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	text, err := readFile(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.PolicySet(c.Context, agent, text)
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "AGENT", "SOURCE", "DIGEST")
	p.Print(struct {
		Type   string `json:"type"`
		Agent  string `json:"agent"`
		Source string `json:"source"`
		Digest string `json:"digest"`
	}{rec.Type, rec.Agent, rec.Source, rec.Digest}, rec.Agent, rec.Source, rec.Digest[:16])
	return p.Flush()
}

func check(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if c.NArg() < 1 {
		return cliutil.Usagef("give an OP (any of oxios(7): state.load, state.save, state.list, mem.recall, exec, tool.run, net.fetch...) and its ARGS")
	}
	a := proto.PolicyCheckArgs{Agent: agent, Op: c.Args().First(), Args: c.Args().Tail()}
	if f := c.String("policy"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return cliutil.Failf("%v", err)
		}
		a.Policy = string(b)
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.PolicyCheck(c.Context, a)
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "OP", "ALLOWED", "RULE", "REASON")
	allowed := "yes"
	switch {
	case rec.Ask:
		allowed = "ask"
	case !rec.Allowed:
		allowed = "no"
	}
	p.Print(rec, rec.Op, allowed, rec.Rule, rec.Reason)
	if err := p.Flush(); err != nil {
		return err
	}
	if !rec.Allowed {
		return cliutil.Silent(cliutil.ExitDenied)
	}
	return nil
}

func test(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	text, err := readFile(c)
	if err != nil {
		return err
	}
	if c.Args().First() == "-" {
		return cliutil.Usagef("the audit entries come on stdin: give the policy as a FILE")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "SEQ", "OP", "TARGET", "CHANGE", "RULE")
	var total proto.PolicyTestResult
	lr := cliutil.NewLineReader(os.Stdin, int(cl.Hello().MaxValue))
	batch := make([]string, 0, testBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := cl.PolicyTest(c.Context, proto.PolicyTestArgs{Agent: agent, Policy: text, Entries: batch}, func(r proto.PolicyTestRecord) error {
			return p.Print(r, fmt.Sprint(r.Seq), r.Op, r.Target, r.Change, r.Rule)
		})
		total.Judged += res.Judged
		total.Refused += res.Refused
		total.Allowed += res.Allowed
		total.Asked += res.Asked
		total.Skipped += res.Skipped
		batch = batch[:0]
		return err
	}
	for {
		l, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return cliutil.Failf("stdin: %v", err)
		}
		if len(l.Text) == 0 {
			continue
		}
		batch = append(batch, string(l.Text))
		if len(batch) == testBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := p.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "ox-policy: %d actions of %s judged: %d would be refused, %d newly allowed, %d would ask (%d entries skipped)\n",
		total.Judged, agent, total.Refused, total.Allowed, total.Asked, total.Skipped)
	if total.Refused > 0 {
		return cliutil.Silent(cliutil.ExitFailure)
	}
	return nil
}
