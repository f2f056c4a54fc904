// Package dispatch finds the commands of ox, the front door: ox NAME runs
// ox-NAME as git runs git-NAME, looked up first beside ox itself (the
// commands installed with it), then on PATH (so a third party's ox-NAME
// is a command too).
package dispatch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Prefix begins the file name of every command of ox.
const Prefix = "ox-"

// Command is one command of ox.
type Command struct {
	Name string // "state", run as ox-state
	Path string
	// Own is true for a command installed beside ox, one of Oxios's.
	Own bool
	// Usage is its one line, from its --help; "" for a command not Own:
	// ox runs no program it does not know just to list it.
	Usage string
}

// Dirs returns the folders searched, in order: ox's own, then PATH's.
func Dirs() []string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		dirs = append(dirs, filepath.Dir(exe))
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d == "" {
			d = "."
		}
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Find returns the path of ox-name, or "" when there is none.
func Find(name string) string {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return ""
	}
	for _, d := range Dirs() {
		if p := filepath.Join(d, Prefix+name); executable(p) {
			return p
		}
	}
	return ""
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// List returns every command, sorted by name; the first of a name found
// in Dirs is the one ox runs. With usage, each Own one is asked for its
// one-line usage.
func List(usage bool) []Command {
	seen := map[string]bool{}
	var cmds []Command
	for i, d := range Dirs() {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			n, ok := strings.CutPrefix(e.Name(), Prefix)
			if !ok || n == "" || seen[n] || !executable(filepath.Join(d, e.Name())) {
				continue
			}
			seen[n] = true
			cmds = append(cmds, Command{Name: n, Path: filepath.Join(d, e.Name()), Own: i == 0})
		}
	}
	slices.SortFunc(cmds, func(a, b Command) int { return strings.Compare(a.Name, b.Name) })
	if usage {
		// A few at a time, each given 5 s: on a busy machine two dozen
		// starts at once outlast any short deadline.
		var wg sync.WaitGroup
		sem := make(chan struct{}, 2*runtime.NumCPU())
		for i := range cmds {
			if cmds[i].Own {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					cmds[i].Usage = Usage(ctx, cmds[i].Path)
				})
			}
		}
		wg.Wait()
	}
	return cmds
}

// Usage returns the one line a command's --help gives under NAME
// ("ox-state - save, load, list and delete agent state"), without its name.
func Usage(ctx context.Context, path string) string {
	cmd := exec.CommandContext(ctx, path, "--help")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	_, rest, ok := bytes.Cut(out, []byte("NAME:\n"))
	if !ok {
		return ""
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	_, u, ok := strings.Cut(strings.TrimSpace(string(line)), " - ")
	if !ok {
		return ""
	}
	return u
}
