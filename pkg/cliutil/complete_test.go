package cliutil

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// completions returns the values Complete offers for line (its words,
// the last the one being typed), without their descriptions.
func completions(app *cli.App, line ...string) []string {
	var b bytes.Buffer
	Complete(context.Background(), &b, app, line)
	var out []string
	for l := range strings.Lines(b.String()) {
		v, _, _ := strings.Cut(strings.TrimSuffix(l, "\n"), "\t")
		out = append(out, v)
	}
	return out
}

func TestComplete(t *testing.T) {
	t.Setenv("OXIOS_SOCKET", t.TempDir()+"/none.sock") // no daemon: no values
	app := subApp()
	app.Commands = append(app.Commands,
		&cli.Command{Name: "save", ArgsUsage: "KEY FILE", Flags: ClientFlags(&cli.StringFlag{Name: "from", TakesFile: true}, &cli.StringFlag{Name: "persona", Aliases: []string{"P"}})},
		&cli.Command{Name: "secret", Hidden: true})
	for _, tc := range []struct {
		line      []string
		want, not []string
	}{
		{[]string{""}, []string{"load", "ls", "save"}, []string{"secret", "help"}},
		{[]string{"l"}, []string{"load", "ls"}, []string{"save"}},
		// Before the command: the app's flags and every command's.
		{[]string{"-"}, []string{"-m", "--message", "--agent", "-a", "--all", "--json", "--from", "--help"}, nil},
		{[]string{"--a"}, []string{"--agent", "--all"}, []string{"--json"}},
		{[]string{"-a", "web", "l"}, []string{"load", "ls"}, nil}, // a flag's value is no command
		{[]string{"load", "--"}, []string{"--agent", "--json", "--socket", "--help"}, []string{"--all", "--message"}},
		{[]string{"ls", "x", "-"}, []string{"--all", "-n"}, nil},
		{[]string{"load", "--socket", ""}, []string{":files"}, nil},
		{[]string{"load", "--socket=", ""}, nil, []string{"load"}},
		{[]string{"save", "k", ""}, []string{":files"}, nil}, // FILE
		{[]string{"save", "--from", "x"}, []string{":files"}, nil},
		{[]string{"save", "-a", "w", "--", "-"}, nil, []string{"--agent"}}, // after --, arguments
		{[]string{"load", "k", ""}, nil, []string{"load", ":files"}},
		{[]string{"save", "--persona", "re"}, []string{"reviewer"}, []string{"ops"}}, // shipped: no daemon needed
	} {
		got := completions(app, tc.line...)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: %q lacks %q", tc.line, got, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("%q: %q offers %q", tc.line, got, w)
			}
		}
	}
}

func TestArgKind(t *testing.T) {
	for _, tc := range []struct {
		app, usage, text string
		n                int
		want             string
	}{
		{"ox-state", "KEY [VALUE]", "", 0, kindKeys},
		{"ox-state", "KEY [VALUE]", "", 1, ""},
		{"ox-state", "KEY...", "", 3, kindKeys},
		{"ox-state", "[PREFIX]", "", 0, kindKeys},
		{"ox-kill", "RUN...", "", 1, kindRuns},
		{"ox-agents", "NAME...", "", 0, kindAgents},
		{"ox-schedule", "NAME", "", 0, kindJobs},
		{"ox-skill", "NAME...", "", 2, kindSkills},
		{"ox-commit", "NAME [REV]", "", 0, ""},
		{"ox-commit", "NAME [REV]", "", 1, kindRevs},
		{"ox-commit", "REV [REV2]", "", 1, kindRevs},
		{"ox-msg", "TO [TEXT...]", "", 0, kindAgents},
		{"ox-msg", "TO [TEXT...]", "", 2, ""},
		{"ox-fork", "", "ox-fork [-r REV] AGENT NEW\nox-fork diff AGENT", 0, kindAgents},
		{"ox-fork", "", "ox-fork [-r REV] AGENT NEW", 1, ""},
		{"ox-skill", "DIR|NAME...", "", 0, kindFiles},
		{"ox-spawn", "[TASK...] | -- COMMAND [ARG...]", "", 0, ""},
		{"ox-schedule", "-- COMMAND [ARG...] | TASK...", "", 0, ""},
	} {
		if got := argKind(tc.app, tc.usage, tc.text, tc.n); got != tc.want {
			t.Errorf("argKind(%s, %q, %q, %d) = %q, want %q", tc.app, tc.usage, tc.text, tc.n, got, tc.want)
		}
	}
}

func TestJoinEquals(t *testing.T) {
	got := joinEquals([]string{"ls", "--agent", "=", "we", "x", "=", "--socket", "="})
	want := []string{"ls", "--agent=we", "x", "=", "--socket="}
	if !slices.Equal(got, want) {
		t.Fatalf("joinEquals = %q, want %q", got, want)
	}
}
