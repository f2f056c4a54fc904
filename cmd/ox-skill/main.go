// Command ox-skill lists, adds, shows and removes an agent's skills. See
// ox-skill(1).
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/skill"
	"github.com/oxios/oxios/share"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-skill", "list, add, show and remove an agent's skills")
	app.Version = version
	app.Description = "A skill is a folder with a SKILL.md (front matter: name, description; then instructions) and the files it refers to. It is installed into the agent's state under skills/NAME/; an LLM run sees each skill's name and description and loads the instructions when it needs them."
	shared := &cli.BoolFlag{Name: "shared", Usage: "the skills shipped with Oxios, not an agent's"}
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{Name: "ls", Usage: "list the agent's skills (or the shipped ones with --shared)", Flags: cliutil.ClientFlags(shared), Action: ls},
		{Name: "add", Usage: "install skills from folders, or shipped skills by name", ArgsUsage: "DIR|NAME...",
			Flags: cliutil.ClientFlags(&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "replace a skill the agent has already"}), Action: add},
		{Name: "show", Usage: "print a skill's SKILL.md", ArgsUsage: "NAME", Flags: cliutil.ClientFlags(shared), Action: show},
		{Name: "rm", Usage: "remove skills from the agent", ArgsUsage: "NAME...", Flags: cliutil.ClientFlags(), Action: rm},
	})
	cliutil.Run(app)
}

// record is the "skill" record.
type record struct {
	Type        string   `json:"type"` // always "skill"
	Agent       string   `json:"agent,omitempty"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Files       []string `json:"files,omitempty"`
	Size        int64    `json:"size,omitempty"`
	Source      string   `json:"source,omitempty"`
	Error       string   `json:"error,omitempty"`
	Deleted     bool     `json:"deleted,omitempty"`
	Text        string   `json:"text"`
}

// store is skill.Store over the daemon, for one agent.
type store = skill.Client

func connect(c *cli.Context) (store, func(), error) {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return store{}, nil, err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return store{}, nil, err
	}
	return store{C: cl, Agent: agent}, func() { cl.Close() }, nil
}

func sharedFS() fs.FS {
	sub, _ := fs.Sub(share.Skills, "skills")
	return sub
}

func ls(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("ls takes no arguments")
	}
	p := cliutil.NewPrinter(c, "NAME", "FILES", "DESCRIPTION")
	if c.Bool("shared") {
		ents, _ := fs.ReadDir(sharedFS(), ".")
		for _, e := range ents {
			sk, files, err := skill.Load(sharedFS(), e.Name())
			if err != nil {
				return cliutil.Failf("shipped skill %s: %v", e.Name(), err)
			}
			rec := record{Type: "skill", Name: sk.Name, Description: sk.Description, Source: "shared", Text: sk.Description}
			for _, f := range files {
				rec.Files = append(rec.Files, f.Path)
				rec.Size += int64(len(f.Data))
			}
			p.Print(rec, rec.Name, fmt.Sprint(len(rec.Files)), oneLine(rec.Description, 70))
		}
		return p.Flush()
	}
	st, done, err := connect(c)
	if err != nil {
		return err
	}
	defer done()
	list, err := skill.List(c.Context, st)
	if err != nil {
		return err
	}
	for _, in := range list {
		rec := record{Type: "skill", Agent: st.Agent, Name: in.Name, Description: in.Description, Files: in.Files, Size: in.Size, Text: in.Description}
		if in.Err != nil {
			rec.Error, rec.Text = in.Err.Error(), in.Err.Error()
		}
		p.Print(rec, rec.Name, fmt.Sprint(len(rec.Files)), oneLine(rec.Text, 70))
	}
	return p.Flush()
}

// source reads what add was given: a folder (an argument with a slash,
// or one that exists), else the name of a shipped skill.
func source(arg string) (*skill.Skill, []skill.FileData, string, error) {
	if fi, err := os.Stat(arg); err == nil || strings.ContainsRune(arg, '/') {
		if err != nil {
			return nil, nil, "", cliutil.Failf("%v", err)
		}
		if !fi.IsDir() {
			return nil, nil, "", cliutil.Failf("%s is not a folder: a skill is a folder with a SKILL.md", arg)
		}
		abs, _ := filepath.Abs(arg)
		sk, files, err := skill.Load(os.DirFS(abs), ".")
		if err != nil {
			return nil, nil, "", cliutil.Failf("%s: %v", arg, err)
		}
		return sk, files, abs, nil
	}
	if err := skill.CheckName(arg); err != nil {
		return nil, nil, "", cliutil.Usagef("%s: not a folder, nor the name of a shipped skill (%v)", arg, err)
	}
	sk, files, err := skill.Load(sharedFS(), arg)
	if err != nil {
		return nil, nil, "", cliutil.Failf("%s: no such folder, and no shipped skill of that name (ox-skill ls --shared lists them)", arg)
	}
	return sk, files, "shared", nil
}

func add(c *cli.Context) error {
	if c.NArg() == 0 {
		return cliutil.Usagef("add takes one or more folders or shipped skill names")
	}
	// Every source is read and checked before anything is written.
	type src struct {
		sk    *skill.Skill
		files []skill.FileData
		from  string
	}
	var srcs []src
	seen := map[string]bool{}
	for _, a := range c.Args().Slice() {
		sk, files, from, err := source(a)
		if err != nil {
			return err
		}
		if seen[sk.Name] {
			return cliutil.Usagef("skill %s given twice", sk.Name)
		}
		seen[sk.Name] = true
		srcs = append(srcs, src{sk, files, from})
	}
	st, done, err := connect(c)
	if err != nil {
		return err
	}
	defer done()
	p := cliutil.NewPrinter(c, "NAME", "FILES", "SOURCE")
	defer p.Flush()
	for _, s := range srcs {
		if err := skill.Install(c.Context, st, s.sk, s.files, c.Bool("force")); err != nil {
			return fmt.Errorf("skill %s: %w", s.sk.Name, err)
		}
		rec := record{Type: "skill", Agent: st.Agent, Name: s.sk.Name, Description: s.sk.Description, Source: s.from, Text: "installed " + s.sk.Name}
		for _, f := range s.files {
			rec.Files = append(rec.Files, f.Path)
			rec.Size += int64(len(f.Data))
		}
		p.Print(rec, rec.Name, fmt.Sprint(len(rec.Files)), rec.Source)
	}
	return nil
}

func show(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("show takes one skill NAME")
	}
	name := c.Args().First()
	if err := skill.CheckName(name); err != nil {
		return cliutil.Usagef("%v", err)
	}
	var raw []byte
	rec := record{Type: "skill", Name: name}
	if c.Bool("shared") {
		b, err := fs.ReadFile(sharedFS(), name+"/"+skill.File)
		if err != nil {
			return proto.Errorf(proto.ENOENT, "no shipped skill %s (ox-skill ls --shared lists them)", name)
		}
		raw, rec.Source = b, "shared"
	} else {
		st, done, err := connect(c)
		if err != nil {
			return err
		}
		defer done()
		b, err := st.Load(c.Context, skill.Key(name, skill.File))
		var pe *proto.Error
		if errors.As(err, &pe) && pe.Code == proto.ENOENT {
			return proto.Errorf(proto.ENOENT, "agent %s has no skill %s (ox-skill ls -a %[1]s lists them)", st.Agent, name)
		}
		if err != nil {
			return err
		}
		raw, rec.Agent = b, st.Agent
	}
	if c.Bool("json") {
		sk, err := skill.Parse(raw)
		if err != nil {
			return cliutil.Failf("%v", err)
		}
		rec.Description, rec.Text = sk.Description, sk.Body
		p := cliutil.NewPrinter(c)
		p.Print(rec)
		return p.Flush()
	}
	_, err := os.Stdout.Write(raw)
	return err
}

func rm(c *cli.Context) error {
	if c.NArg() == 0 {
		return cliutil.Usagef("rm takes one or more skill NAMEs")
	}
	for _, n := range c.Args().Slice() {
		if err := skill.CheckName(n); err != nil {
			return cliutil.Usagef("%v", err)
		}
	}
	st, done, err := connect(c)
	if err != nil {
		return err
	}
	defer done()
	p := cliutil.NewPrinter(c, "NAME", "FILES", "STATUS")
	defer p.Flush()
	var first error
	for _, n := range c.Args().Slice() {
		count, err := skill.Remove(c.Context, st, n)
		if err != nil {
			p.Flush()
			fmt.Fprintf(os.Stderr, "ox-skill: %v\n", err)
			if first == nil || cliutil.Code(err) > cliutil.Code(first) {
				first = err
			}
			continue
		}
		rec := record{Type: "skill", Agent: st.Agent, Name: n, Deleted: true, Text: fmt.Sprintf("removed %s (%d files)", n, count)}
		p.Print(rec, n, fmt.Sprint(count), "removed")
	}
	if first != nil {
		return cliutil.Silent(cliutil.Code(first))
	}
	return nil
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max-1] + "…"
	}
	return s
}
