// Command ox is the front door of Oxios: `ox state ls` runs ox-state ls,
// as git runs git-NAME; `ox help` lists the commands, `ox help state`
// opens ox-state(1). See ox(1).
//
// It links no CLI framework: it only finds and execs (package dispatch).
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/oxios/oxios/pkg/completion"
	"github.com/oxios/oxios/pkg/dispatch"
)

var version = "0.1.0-dev"

// Exit codes, as pkg/cliutil's (which ox does not link, for its start).
const (
	exitUsage       = 2
	exitUnavailable = 69
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		list(os.Stderr)
		os.Exit(exitUsage)
	}
	switch a := args[0]; a {
	case "help", "-h", "--help":
		if len(args) == 1 {
			list(os.Stdout)
			return
		}
		os.Exit(help(args[1]))
	case "-v", "--version":
		fmt.Printf("ox version %s\n", version)
	case "--complete":
		complete(args[1:])
	case "completion":
		os.Exit(writeCompletion(args[1:]))
	default:
		if strings.HasPrefix(a, "-") {
			fmt.Fprintf(os.Stderr, "ox: unknown option %s: ox takes a command first (ox help lists them; ox-NAME --help their flags)\n", a)
			os.Exit(exitUsage)
		}
		run(a, args[1:])
	}
}

// run execs ox-name with args: the command's exit is ox's.
func run(name string, args []string) {
	path := dispatch.Find(name)
	if path == "" {
		fmt.Fprintf(os.Stderr, "ox: unknown command %s (ox help lists them)\n", name)
		os.Exit(exitUsage)
	}
	argv := append([]string{dispatch.Prefix + name}, args...)
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "ox: running %s: %v\n", path, err)
	os.Exit(exitUnavailable)
}

// list prints every command with its one-line usage.
func list(w *os.File) {
	fmt.Fprintln(w, "usage: ox COMMAND [ARGS...]        run ox-COMMAND ARGS...")
	fmt.Fprintln(w, "       ox help [COMMAND]           this list, or COMMAND's man page")
	fmt.Fprintln(w, "       ox completion bash|zsh|fish print the shell's completion script")
	fmt.Fprintln(w, "       ox --version")
	fmt.Fprintln(w)
	cmds := dispatch.List(true)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Commands:")
	for _, c := range cmds {
		if c.Own {
			fmt.Fprintf(tw, "   %s\t%s\n", c.Name, c.Usage)
		}
	}
	other := false
	for _, c := range cmds {
		if !c.Own {
			if !other {
				fmt.Fprintln(tw, "\nOther commands on PATH:")
				other = true
			}
			fmt.Fprintf(tw, "   %s\t%s\n", c.Name, c.Path)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ox help COMMAND opens its man page; ox COMMAND --help lists its flags.")
	fmt.Fprintln(w, "oxiosd(8) is the daemon they talk to; oxios(7) tells how it fits together.")
}

// help opens the man page of ox-name: the installed one, else the one of
// a source tree ox runs from (bin/ox, man/ox-NAME.1), else its --help.
func help(name string) int {
	path := dispatch.Find(name)
	page := dispatch.Prefix + name
	if name == "ox" || name == "oxiosd" {
		page = name
	} else if path == "" {
		fmt.Fprintf(os.Stderr, "ox: unknown command %s (ox help lists them)\n", name)
		return exitUsage
	}
	if man, err := exec.LookPath("man"); err == nil {
		if exec.Command(man, "-w", page).Run() == nil {
			return execv(man, []string{"man", page})
		}
		if exe, err := os.Executable(); err == nil {
			for _, sec := range []string{"1", "8"} {
				local := filepath.Join(filepath.Dir(exe), "..", "man", page+"."+sec)
				if _, err := os.Stat(local); err == nil {
					return execv(man, []string{"man", "-l", local})
				}
			}
		}
	}
	if path == "" {
		fmt.Fprintf(os.Stderr, "ox: no man page for %s\n", page)
		return 1
	}
	return execv(path, []string{page, "--help"})
}

func execv(path string, argv []string) int {
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "ox: running %s: %v\n", path, err)
	return exitUnavailable
}

// complete answers the completion scripts: the first word is a command,
// the rest is that command's to complete.
func complete(words []string) {
	if len(words) <= 1 {
		cur := ""
		if len(words) == 1 {
			cur = words[0]
		}
		for _, w := range []string{"help"} {
			if strings.HasPrefix(w, cur) {
				fmt.Println(w)
			}
		}
		for _, c := range dispatch.List(false) {
			if strings.HasPrefix(c.Name, cur) {
				fmt.Println(c.Name)
			}
		}
		return
	}
	if words[0] == "help" {
		if len(words) == 2 {
			complete(words[1:])
		}
		return
	}
	if path := dispatch.Find(words[0]); path != "" {
		execv(path, append([]string{dispatch.Prefix + words[0], "--complete"}, words[1:]...))
	}
}

// writeCompletion prints the completion script of a shell for ox and the
// commands named (default: every command found).
func writeCompletion(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: ox completion bash|zsh|fish [COMMAND...]")
		return exitUsage
	}
	cmds := args[1:]
	if len(cmds) == 0 {
		cmds = []string{"ox"}
		for _, c := range dispatch.List(false) {
			cmds = append(cmds, dispatch.Prefix+c.Name)
		}
	}
	if err := completion.Write(os.Stdout, args[0], cmds...); err != nil {
		fmt.Fprintf(os.Stderr, "ox: %v\n", err)
		return exitUsage
	}
	return 0
}
