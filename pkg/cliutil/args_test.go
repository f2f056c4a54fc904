package cliutil

import (
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
		{"tag name -h", "tag -h name"}, // not a subcommand: an argument
		{"- -a ops", "-a ops -"},
		{"x --nosuch y", "--nosuch x y"}, // unknown: urfave/cli names it
		{"x -a ops --generate-bash-completion", "-a ops x --generate-bash-completion"},
		{"ls x -a", "ls -a x"}, // a value flag last: urfave/cli says it needs one
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
