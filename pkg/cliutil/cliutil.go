// Package cliutil holds the conventions every ox-* command shares: exit
// codes, the --socket/--json/--agent flags, how errors are reported, and
// how records are printed (JSON lines off a terminal, a table on one).
package cliutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// Exit codes, documented in every man page's EXIT STATUS. 69 and 77 are
// sysexits.h's EX_UNAVAILABLE and EX_NOPERM.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	// An LLM run's own: its budget ran out, or its model endpoint failed
	// (down, or refusing the key, the URL or the request).
	ExitBudget   = 3
	ExitEndpoint = 4
	// ExitDamaged (sysexits.h's EX_DATAERR) is oxiosd's refusal to start
	// on damaged data (the journal, the audit log, the repository's
	// objects): a restart will not mend it, oxiosd --recover or a backup
	// does.
	ExitDamaged     = 65
	ExitUnavailable = 69
	ExitDenied      = 77
	// ExitConfig (sysexits.h's EX_CONFIG) is oxiosd's exit on a bad
	// configuration: a restart will not fix it, so its unit does not retry.
	ExitConfig = 78
)

// ExitError carries an exit code with its message.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Usagef is a usage error: exit 2.
func Usagef(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Failf is a failure with a message: exit 1.
func Failf(format string, args ...any) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf(format, args...)}
}

// Silent is a failure that has already been reported: exit code only.
func Silent(code int) error { return &ExitError{Code: code} }

// Code maps an error to the exit code.
func Code(err error) int {
	var ee *ExitError
	var pe *proto.Error
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, client.ErrUnreachable):
		return ExitUnavailable
	case errors.As(err, &pe):
		if pe.Code == proto.EACCES || pe.Code == proto.EPERM {
			return ExitDenied
		}
	}
	return ExitFailure
}

// Hint is what to do about an unreachable daemon.
const Hint = "is oxiosd running? start it with `oxiosd` (or `systemctl start oxiosd`, `systemctl --user start oxiosd`), or set OXIOS_SOCKET / --socket to its socket"

// Report prints err the way every command does, and returns the exit code.
func Report(prog string, err error) int {
	if err == nil {
		return ExitOK
	}
	code := Code(err)
	var ee *ExitError
	if errors.As(err, &ee) && ee.Err == nil {
		return code
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
	if code == ExitUnavailable {
		fmt.Fprintf(os.Stderr, "%s: %s\n", prog, Hint)
	}
	return code
}

// Flags every client command takes.
var (
	SocketFlag = &cli.StringFlag{Name: "socket", Usage: "oxiosd socket `PATH`", EnvVars: []string{"OXIOS_SOCKET"}, Value: proto.DefaultPaths().Socket, TakesFile: true}
	JSONFlag   = &cli.BoolFlag{Name: "json", Usage: "print JSON lines even on a terminal"}
	AgentFlag  = &cli.StringFlag{Name: "agent", Aliases: []string{"a"}, Usage: "act on agent `NAME`", EnvVars: []string{"OXIOS_AGENT"}}
)

// ClientFlags are the flags of every subcommand that talks to the daemon.
func ClientFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{AgentFlag, SocketFlag, JSONFlag}, extra...)
}

// Agent returns the --agent value, checked.
func Agent(c *cli.Context) (string, error) {
	a := c.String("agent")
	if a == "" {
		return "", Usagef("no agent: give -a AGENT or set OXIOS_AGENT")
	}
	if err := proto.CheckAgent(a); err != nil {
		return "", Usagef("%s", err.Message)
	}
	return a, nil
}

// Connect dials the daemon named by --socket.
func Connect(c *cli.Context) (*client.Client, error) {
	return client.Dial(c.Context, c.String("socket"))
}

// App returns an app with the shared behaviour: usage errors exit 2, the
// context is cancelled on SIGINT/SIGTERM.
func App(name, usage string) *cli.App {
	return &cli.App{
		Name:                 name,
		Usage:                usage,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		OnUsageError: func(c *cli.Context, err error, isSub bool) error {
			return &ExitError{Code: ExitUsage, Err: err}
		},
		CommandNotFound: func(c *cli.Context, cmd string) {
			fmt.Fprintf(os.Stderr, "%s: unknown command %s (%s help lists them)\n", name, cmd, name)
			os.Exit(ExitUsage)
		},
	}
}

// Run runs app with os.Args (flags anywhere, see Args) and exits with the
// right code.
func Run(app *cli.App) {
	CompleteIfAsked(app)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	prepare(app)
	showCommandFlags()
	err := app.RunContext(ctx, Args(app, os.Args))
	stop()
	os.Exit(Report(filepath.Base(os.Args[0]), err))
}

// prepare gives app the exit codes of the table where urfave/cli has its
// own: a missing required flag is a usage error (exit 2, one line naming
// the flag, not the whole help on stdout), and a command that has
// subcommands, run with none, says which there are and exits 2 (not 0).
func prepare(app *cli.App) {
	app.Before = requireFlags(app.Flags, app.Before)
	if app.Action == nil && len(app.Commands) > 0 {
		app.Action = needCommand(app.Name, app.Commands)
	}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			cmd.Before = requireFlags(cmd.Flags, cmd.Before)
			if cmd.Action == nil && len(cmd.Subcommands) > 0 {
				cmd.Action = needCommand(prefix+" "+cmd.Name, cmd.Subcommands)
			}
			walk(prefix+" "+cmd.Name, cmd.Subcommands)
		}
	}
	walk(app.Name, app.Commands)
}

// requireFlags takes the Required mark off flags and checks them in a
// Before hook (run after next's own checks) instead.
func requireFlags(flags []cli.Flag, next cli.BeforeFunc) cli.BeforeFunc {
	var required []cli.Flag
	for _, f := range flags {
		if rf, ok := f.(cli.RequiredFlag); ok && rf.IsRequired() {
			if v := reflect.ValueOf(f); v.Kind() == reflect.Pointer {
				if fv := v.Elem().FieldByName("Required"); fv.IsValid() && fv.CanSet() {
					fv.SetBool(false)
					required = append(required, f)
				}
			}
		}
	}
	if len(required) == 0 {
		return next
	}
	return func(c *cli.Context) error {
		var missing []string
		for _, f := range required {
			name := f.Names()[0]
			if !c.IsSet(name) {
				missing = append(missing, "--"+name)
			}
		}
		if len(missing) > 0 {
			name := c.App.Name
			if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
				name += " " + c.Command.FullName()
			}
			return Usagef("%s %s missing (see %s --help)", strings.Join(missing, " and "), plural(len(missing), "is", "are"), name)
		}
		if next != nil {
			return next(c)
		}
		return nil
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// needCommand is the action of a command run without one of its
// subcommands. `help [COMMAND]` is one of them though hidden from the
// list: the help the unknown-command message points to.
func needCommand(name string, cmds []*cli.Command) cli.ActionFunc {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return func(c *cli.Context) error {
		if c.NArg() > 0 {
			return UnknownCommand(c)
		}
		return Usagef("give a command: %s (see %s --help)", strings.Join(names, ", "), name)
	}
}

// UnknownCommand is what a command with subcommands answers to an argument
// that names none of them, or to `help [COMMAND]`: help is one of its
// commands though hidden from the list, the one the message points to.
func UnknownCommand(c *cli.Context) error {
	name := c.App.Name
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name += " " + c.Command.FullName()
	}
	first := c.Args().First()
	if first == "help" {
		if c.NArg() == 1 {
			return cli.ShowAppHelp(c)
		}
		first = c.Args().Get(1)
		for _, cmd := range c.App.Commands {
			if cmd.HasName(first) && !cmd.Hidden {
				return cli.ShowCommandHelp(c, cmd.Name)
			}
		}
	}
	return Usagef("unknown command %s (%s help lists them)", first, name)
}

// SubcommandUsage marks every subcommand's usage errors as exit 2 too.
func SubcommandUsage(cmds []*cli.Command) []*cli.Command {
	for _, cmd := range cmds {
		cmd.OnUsageError = func(c *cli.Context, err error, isSub bool) error {
			return &ExitError{Code: ExitUsage, Err: err}
		}
	}
	return cmds
}
