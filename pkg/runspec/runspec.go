// Package runspec is what a run, an exec or a WASM tool call is started
// with, besides what the kernel decides: the command line and environment
// of the LLM runner (ox-agent), the PATH of runs and how a command is
// found in it, the process limits of a policy, an exec's or a tool
// call's workspace, timeout, output cap and environment; the record and
// the audit target of what an exec or a tool call ended with; those of
// the MCP calls of an LLM run; and the host sandboxes are made on, what
// the machine offers them found once at start (OpenHost). It also runs
// an exec (RunExec) and a tool call (RunTool) that a policy allowed, and
// makes a spawn's spec in its sandbox (Boxed); a refusal met on the way
// is a *Refusal for the kernel to audit.
package runspec

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Runner is the LLM runner: configured (the runner of the [runs]
// section), or ox-agent beside oxiosd, or in PATH.
func Runner(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "ox-agent")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("ox-agent")
	if err != nil {
		return "", proto.Errorf(proto.ENOENT, "the LLM runner ox-agent is neither beside oxiosd nor in PATH (set runner in the [runs] section of oxios.toml)")
	}
	return p, nil
}

// Path is PATH for runs: oxiosd's own folder first, so that a run
// finds the ox-* commands of the same build.
func Path() string {
	p := os.Getenv("PATH")
	if p == "" {
		p = "/usr/local/bin:/usr/bin:/bin"
	}
	if exe, err := os.Executable(); err == nil {
		p = filepath.Dir(exe) + ":" + p
	}
	return p
}

// Runnable checks what a new job of a schedule runs: a command found as
// a run would find it, or, with none, an LLM task, which needs a model
// endpoint (baseURL, the [llm] base_url).
func Runnable(command []string, baseURL string) error {
	switch {
	case len(command) == 0 && baseURL == "":
		// Accepted, it would fail at every firing, seen only in the log.
		return proto.Errorf(proto.ENOEXEC, "no model endpoint is configured for LLM runs, so an LLM job would fail at every firing: set base_url in the [llm] section of oxios.toml, or give a command after --")
	case len(command) > 0:
		if _, err := LookPath(command[0]); err != nil {
			return err
		}
	}
	return nil
}

// LookPath finds prog as a run would: an absolute path as it is, a name
// in Path.
func LookPath(prog string) (string, error) {
	if filepath.IsAbs(prog) {
		return prog, nil
	}
	if strings.Contains(prog, "/") {
		return "", proto.Errorf(proto.EINVAL, "%q: give a command name or an absolute path (runs start in their workspace)", prog)
	}
	for _, dir := range filepath.SplitList(Path()) {
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", proto.Errorf(proto.ENOENT, "%s: command not found in oxiosd's PATH", prog)
}

// Limits are the limits of processes policy p sets.
func Limits(p *policy.Policy) supervisor.Limits {
	return supervisor.Limits{
		Memory:    uint64(p.Limits.Memory),
		CPU:       uint64(p.Limits.CPU.D() / time.Second),
		Processes: p.Limits.Processes,
		OpenFiles: p.Limits.OpenFiles,
	}
}

// maxSchema is the most a schema may hold: it goes on the runner's
// command line, where one argument may hold 128 KiB.
const maxSchema = 64 << 10

// RunnerArgv is the command line of the LLM runner for a: its options,
// then the task after "--" (so a task that starts with a dash is a task).
func RunnerArgv(runner string, a proto.SpawnArgs) ([]string, *proto.Error) {
	argv := []string{runner}
	if a.Model != "" {
		// On the command line, not in the environment: the runner lets a
		// persona's model beat the config's, not the one asked for.
		argv = append(argv, "--model", a.Model)
	}
	if o := a.LLM; o != nil {
		if o.Continue && o.Conversation != "" {
			return nil, proto.Errorf(proto.EINVAL, "give continue or conversation, not both")
		}
		if t := o.Temperature; t != nil && (*t < 0 || *t > 2) {
			return nil, proto.Errorf(proto.EINVAL, "temperature %v: want 0 to 2", *t)
		}
		if o.MaxTokens < 0 {
			return nil, proto.Errorf(proto.EINVAL, "max_tokens %d: want 0 (no cap) or more", o.MaxTokens)
		}
		for _, s := range []struct{ name, v string }{{"persona", o.Persona}, {"conversation", o.Conversation}} {
			if strings.ContainsAny(s.v, "/ \t\n\x00") || strings.HasPrefix(s.v, "-") {
				return nil, proto.Errorf(proto.EINVAL, "%s %q: want a name such as ops or a run id such as r-12", s.name, s.v)
			}
		}
		add := func(flag, v string) {
			if v != "" {
				argv = append(argv, "--"+flag+"="+v)
			}
		}
		add("system", o.System)
		add("persona", o.Persona)
		add("conversation", o.Conversation)
		if o.Temperature != nil {
			add("temperature", strconv.FormatFloat(*o.Temperature, 'g', -1, 64))
		}
		if o.MaxTokens > 0 {
			add("max-tokens", strconv.Itoa(o.MaxTokens))
		}
		if len(o.Schema) > 0 {
			var c bytes.Buffer
			if err := json.Compact(&c, o.Schema); err != nil {
				return nil, proto.Errorf(proto.EINVAL, "schema: not JSON: %v", err)
			}
			if c.Len() > maxSchema {
				return nil, proto.Errorf(proto.EINVAL, "schema: %d bytes; at most %d", c.Len(), maxSchema)
			}
			add("schema", c.String())
		}
		names := make([]string, 0, len(o.Vars))
		for name := range o.Vars {
			if !proto.VarName(name) {
				return nil, proto.Errorf(proto.EINVAL, "var %q: want a name of letters, digits and _", name)
			}
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			argv = append(argv, "--var="+name+"="+o.Vars[name])
		}
		for _, f := range o.Fragments {
			if f.URL {
				if !strings.HasPrefix(f.Name, "http://") && !strings.HasPrefix(f.Name, "https://") {
					return nil, proto.Errorf(proto.EINVAL, "fragment %q: want an http or https URL", f.Name)
				}
				add("fragment", f.Name)
			}
		}
		for _, b := range []struct {
			flag string
			on   bool
		}{{"continue", o.Continue}, {"no-recall", o.NoRecall}, {"no-summary", o.NoSummary}, {"no-keep", o.NoKeep}, {"wait-endpoint", o.WaitEndpoint}, {"interactive", o.Chat}} {
			if b.on {
				argv = append(argv, "--"+b.flag)
			}
		}
	}
	if a.Task == "" && a.Chatting() {
		return argv, nil // the first message comes on stdin
	}
	return append(argv, "--", a.Task), nil
}

// RunnerEnv is the environment that tells the runner the [llm] config it
// needs: the model and the answers' settings. The endpoint, its key, its
// timeouts and retries are the kernel's (llm.chat).
func RunnerEnv(l config.LLM, model string) []string {
	env := []string{"OXIOS_LLM_MODEL=" + model}
	if l.MaxTokens > 0 {
		env = append(env, "OXIOS_LLM_MAX_TOKENS="+strconv.Itoa(l.MaxTokens))
	}
	if l.Temperature >= 0 {
		env = append(env, "OXIOS_LLM_TEMPERATURE="+strconv.FormatFloat(l.Temperature, 'g', -1, 64))
	}
	return env
}
