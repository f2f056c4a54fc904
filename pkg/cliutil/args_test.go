package cliutil

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	app := App("ox-test", "")
	app.Version = "1"
	app.Flags = ClientFlags(
		&cli.IntFlag{Name: "k", Aliases: []string{"n"}},
		&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}},
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}},
	)
	app.Commands = []*cli.Command{
		{Name: "ls", Aliases: []string{"list"}, Flags: ClientFlags(&cli.BoolFlag{Name: "all"})},
		{Name: "tag", Subcommands: []*cli.Command{{Name: "add", Flags: ClientFlags()}}},
	}
	return app
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"-a ops note", "-a ops note"},
		{"note about -k 2 -a ops", "-k 2 -a ops note about"},
		{"line 4242 -k 3 -a ops", "-k 3 -a ops line 4242"},
		{"line -k=3", "-k=3 line"},
		{"task -d -a ops", "-d -a ops task"}, // a bool flag takes no value
		{"-k -3 q", "-k -3 q"},               // a value that looks like a flag
		{"-a A -- cmd --flag", "-a A -- cmd --flag"},
		{"-a A cmd -- --flag -k 1", "-a A -- cmd --flag -k 1"},
		{"ls / -a ops", "ls -a ops /"},
		{"list x --all --json", "list --all --json x"},
		{"ls -a ops -- -weird-key", "ls -a ops -- -weird-key"},
		{"tag add name -a ops", "tag add -a ops name"},
		{"tag name -h", "tag -h"},      // not a subcommand: an argument, and help takes none
		{"ls x y --help", "ls --help"}, // urfave/cli would look for the command x
		{"- -a ops", "-a ops -"},
		{"x --nosuch y", "--nosuch x y"}, // unknown: urfave/cli names it
		{"x -a ops --generate-bash-completion", "-a ops x --generate-bash-completion"},
		{"ls x -a", "ls -a x"},               // a value flag last: urfave/cli says it needs one
		{"-a ops ls x", "ls -a ops x"},       // both take -a: the command does
		{"-a ops -k 2 ls", "-k 2 ls -a ops"}, // -k is the app's only
		{"-a ops tag x", "-a ops tag x"},     // tag takes no -a, the app does
	} {
		in := append([]string{"ox-test"}, strings.Fields(tc.in)...)
		want := append([]string{"ox-test"}, strings.Fields(tc.want)...)
		if got := Args(testApp(), in); !reflect.DeepEqual(got, want) {
			t.Errorf("Args(%q) = %q, want %q", tc.in, got[1:], want[1:])
		}
	}
}

// TestArgsParsed runs the reordered line through urfave/cli itself: the
// flags land in the flags and the arguments in the arguments.
func TestArgsParsed(t *testing.T) {
	var agent string
	var k int
	var env, args []string
	app := testApp()
	app.Action = func(c *cli.Context) error {
		agent, k, env, args = c.String("agent"), c.Int("k"), c.StringSlice("env"), c.Args().Slice()
		return nil
	}
	line := []string{"ox-test", "note", "-e", "A=1", "about", "-a", "ops", "-n", "7", "-e", "B=2"}
	if err := app.Run(Args(app, line)); err != nil {
		t.Fatal(err)
	}
	if agent != "ops" || k != 7 || !reflect.DeepEqual(env, []string{"A=1", "B=2"}) || !reflect.DeepEqual(args, []string{"note", "about"}) {
		t.Fatalf("agent %q k %d env %q args %q", agent, k, env, args)
	}
	if err := app.Run(Args(app, []string{"ox-test", "-a", "ops", "--", "-k", "1"})); err != nil {
		t.Fatal(err)
	}
	if k != 0 || !reflect.DeepEqual(args, []string{"-k", "1"}) {
		t.Fatalf("after --: k %d args %q", k, args)
	}
}

// subApp is shaped like ox-state and ox-commit: the shared flags belong to
// the subcommands, and the app has one flag of its own.
func subApp() *cli.App {
	app := App("ox-sub", "")
	app.Flags = []cli.Flag{&cli.StringFlag{Name: "message", Aliases: []string{"m"}}}
	app.Commands = SubcommandUsage([]*cli.Command{
		{Name: "load", Flags: ClientFlags()},
		{Name: "ls", Flags: ClientFlags(&cli.BoolFlag{Name: "all"}, &cli.IntFlag{Name: "n"})},
	})
	return app
}

func TestArgsBeforeCommand(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"-a web load config/port", "load -a web config/port"},
		{"--json -a web load k", "load --json -a web k"},
		{"-a=web load k", "load -a=web k"},
		{"-a ls ls", "ls -a ls"}, // a value, then the command
		{"--all -n 3 ls p -a x", "ls --all -n 3 -a x p"},
		{"-m hi ls -a x", "-m hi ls -a x"},
		{"ls -m hi -a x", "ls -m -a x hi"}, // the app's flag, after the command: refused
		{"-a x ls", "ls -a x"},
		{"--all load k", "load --all k"},       // ls's flag: load refuses it
		{"--nosuch load k", "--nosuch load k"}, // no command takes it
		{"-a x lsx", "lsx -a x"},               // no such command: that is the error
		{"-a x -- load", "-a x -- load"},       // after --, an argument
		{"-h load", "-h load"},                 // the app's own help
		{"-a x load -- -k", "load -a x -- -k"}, // and "--" still ends flags
		{"-a x ls --generate-bash-completion", "ls -a x --generate-bash-completion"},
	} {
		in := append([]string{"ox-sub"}, strings.Fields(tc.in)...)
		want := append([]string{"ox-sub"}, strings.Fields(tc.want)...)
		if got := Args(subApp(), in); !reflect.DeepEqual(got, want) {
			t.Errorf("Args(%q) = %q, want %q", tc.in, got[1:], want[1:])
		}
	}
}

// TestArgsBeforeCommandParsed runs the lines through urfave/cli: the
// flags given before the command reach its action, and one the command
// does not take is refused by name.
func TestArgsBeforeCommandParsed(t *testing.T) {
	var agent, msg string
	var args []string
	app := subApp()
	for _, c := range app.Commands {
		c.Action = func(c *cli.Context) error {
			agent, msg, args = c.String("agent"), c.String("message"), c.Args().Slice()
			return nil
		}
	}
	for _, line := range []string{"-a web load config/port", "load config/port -a web", "load -a web config/port"} {
		agent, args = "", nil
		if err := app.Run(Args(app, append([]string{"ox-sub"}, strings.Fields(line)...))); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if agent != "web" || !reflect.DeepEqual(args, []string{"config/port"}) {
			t.Fatalf("%s: agent %q args %q", line, agent, args)
		}
	}
	app.Writer = io.Discard
	if err := app.Run(Args(app, strings.Fields("ox-sub -m hi ls"))); err != nil || msg != "hi" {
		t.Fatalf("-m hi ls: %v, message %q", err, msg)
	}
	app = subApp() // a fresh one, as each process has
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	err := app.Run(Args(app, strings.Fields("ox-sub --all load k")))
	if err == nil || !strings.Contains(err.Error(), "-all") || Code(err) != ExitUsage {
		t.Fatalf("--all load k: %v (exit %d), want a usage error naming -all", err, Code(err))
	}
}
