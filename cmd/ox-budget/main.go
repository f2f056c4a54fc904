// Command ox-budget shows and sets what agents may spend. See ox-budget(1).
package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-budget", "show and set what an agent may spend")
	app.Version = version
	app.Description = "An agent's budget bounds the tokens, cost, wall time and execs of the agent in all (until reset) and of each of its runs. Limits come from the agent's policy until the admin sets others here; 0 means no limit. A model call past a limit is refused (EDQUOT), audited, and the run ends; an exec past one is refused (EDQUOT) and audited."
	limitFlags := []cli.Flag{
		&cli.Int64Flag{Name: "tokens", Usage: "tokens the agent may use in all"},
		&cli.Float64Flag{Name: "cost", Usage: "cost the agent may incur in all"},
		&cli.DurationFlag{Name: "wall", Usage: "wall time the agent's runs may take in all"},
		&cli.Int64Flag{Name: "execs", Usage: "execs the agent may make in all"},
		&cli.Int64Flag{Name: "run-tokens", Usage: "tokens one run may use"},
		&cli.Float64Flag{Name: "run-cost", Usage: "cost one run may incur"},
		&cli.DurationFlag{Name: "run-wall", Usage: "wall time one run may take (it is ended past it)"},
		&cli.Int64Flag{Name: "run-execs", Usage: "execs one run may make"},
	}
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{Name: "show", Usage: "show an agent's limits and what it has used; with no agent, every agent's use and cost, one line each", Flags: cliutil.ClientFlags(), Action: show},
		{Name: "set", Usage: "set an agent's limits (admin); flags not given keep their value", Flags: cliutil.ClientFlags(limitFlags...), Action: set},
		{Name: "reset", Usage: "zero what an agent has used (admin)", Flags: cliutil.ClientFlags(), Action: reset},
	})
	cliutil.Run(app)
}

func print(c *cli.Context, r proto.BudgetRecord) error {
	p := cliutil.NewPrinter(c, "AGENT", "WHAT", "USED", "LIMIT", "RUN LIMIT")
	lim := func(v float64, d bool) string {
		if v == 0 {
			return "-"
		}
		if d {
			return (time.Duration(v * float64(time.Second))).String()
		}
		return fmt.Sprint(v)
	}
	if p.JSON {
		p.Print(r)
		return p.Flush()
	}
	rows := [][]string{
		{"tokens", fmt.Sprint(r.Used.Tokens), lim(float64(r.Limit.Tokens), false), lim(float64(r.RunLimit.Tokens), false)},
		{"cost", fmt.Sprintf("%.4g", r.Used.Cost), lim(r.Limit.Cost, false), lim(r.RunLimit.Cost, false)},
		{"wall", (time.Duration(r.Used.Wall * float64(time.Second))).Round(time.Millisecond).String(), lim(r.Limit.Wall, true), lim(r.RunLimit.Wall, true)},
		{"execs", fmt.Sprint(r.Used.Execs), lim(float64(r.Limit.Execs), false), lim(float64(r.RunLimit.Execs), false)},
	}
	for _, row := range rows {
		p.Print(r, append([]string{r.Agent}, row...)...)
	}
	return p.Flush()
}

func show(c *cli.Context) error {
	if c.String("agent") == "" {
		return showAll(c)
	}
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.BudgetShow(c.Context, agent)
	if err != nil {
		return err
	}
	return print(c, r)
}

func set(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	cur, err := cl.BudgetShow(c.Context, agent)
	var pe *proto.Error
	if errors.As(err, &pe) && pe.Code == proto.ENOENT {
		// No agent yet: the admin may set its limits first (the budget
		// file then brings it into being), from none.
		cur, err = proto.BudgetRecord{}, nil
	}
	if err != nil {
		return err
	}
	a := proto.BudgetSetArgs{Agent: agent}
	apply := func(prefix string, b proto.Budget) *proto.Budget {
		changed := false
		if c.IsSet(prefix + "tokens") {
			b.Tokens, changed = c.Int64(prefix+"tokens"), true
		}
		if c.IsSet(prefix + "cost") {
			b.Cost, changed = c.Float64(prefix+"cost"), true
		}
		if c.IsSet(prefix + "wall") {
			b.Wall, changed = c.Duration(prefix+"wall").Seconds(), true
		}
		if c.IsSet(prefix + "execs") {
			b.Execs, changed = c.Int64(prefix+"execs"), true
		}
		if !changed {
			return nil
		}
		if b.Tokens < 0 || b.Cost < 0 || b.Wall < 0 || b.Execs < 0 {
			err = cliutil.Usagef("limits may not be negative")
		}
		return &b
	}
	a.Limit = apply("", cur.Limit)
	a.RunLimit = apply("run-", cur.RunLimit)
	if err != nil {
		return err
	}
	if a.Limit == nil && a.RunLimit == nil {
		return cliutil.Usagef("give a limit to set (--tokens, --cost, --wall, --execs, --run-tokens...)")
	}
	r, err := cl.BudgetSet(c.Context, a)
	if err != nil {
		return err
	}
	return print(c, r)
}

func reset(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.BudgetReset(c.Context, agent)
	if err != nil {
		return err
	}
	return print(c, r)
}

// showAll shows the budget of every agent the caller may see, one line
// each (records with --json): what it used and what its limits are.
func showAll(c *cli.Context) error {
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	var agents []string
	if err := cl.AgentList(c.Context, func(a proto.AgentRecord) error {
		agents = append(agents, a.Agent)
		return nil
	}); err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "AGENT", "TOKENS", "LIMIT", "COST", "LIMIT", "WALL", "EXECS")
	lim := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprint(v)
	}
	for _, a := range agents {
		r, err := cl.BudgetShow(c.Context, a)
		if err != nil {
			return err
		}
		p.Print(r, a, fmt.Sprint(r.Used.Tokens), lim(float64(r.Limit.Tokens)), fmt.Sprintf("%.4g", r.Used.Cost), lim(r.Limit.Cost),
			(time.Duration(r.Used.Wall * float64(time.Second))).Round(time.Second).String(), fmt.Sprint(r.Used.Execs))
	}
	return p.Flush()
}
