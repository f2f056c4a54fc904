package policy

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Hooks names, per class of policy question, a program that answers it
// after the static rules allowed the call ([hooks] in oxios-policy(5)):
// the kernel runs it sandboxed, as an exec of the agent is, with the
// syscall's record as JSON on stdin; it exits HookAllow to allow or
// HookRefuse to refuse, printing a reason. Anything else (another
// status, a signal, the timeout, a program that cannot run) refuses:
// a hook fails closed. Each list is an argv: the program, by absolute
// path, and its arguments.
type Hooks struct {
	State  []string `toml:"state"`  // state.load, state.save, state.delete, state.list
	Memory []string `toml:"memory"` // mem.remember, mem.recall, mem.list, mem.forget
	Exec   []string `toml:"exec"`   // exec
	Tools  []string `toml:"tools"`  // tool.run
	Net    []string `toml:"net"`    // net.fetch
	MCP    []string `toml:"mcp"`    // mcp.call
	Msg    []string `toml:"msg"`    // msg.send
	// Timeout bounds one run of a hook (default DefaultHookTimeout).
	Timeout Duration `toml:"timeout"`
}

// The exit statuses of a hook that mean something: any other refuses.
const (
	HookAllow  = 0
	HookRefuse = 77
)

// DefaultHookTimeout is hooks.timeout when the policy gives none.
const DefaultHookTimeout = 5 * time.Second

// HookReasonMax bounds the reason a hook prints, as the refusal quotes it.
const HookReasonMax = 200

// The classes of hooks, as [hooks] names them.
const (
	HookState  = "state"
	HookMemory = "memory"
	HookExec   = "exec"
	HookTools  = "tools"
	HookNet    = "net"
	HookMCP    = "mcp"
	HookMsg    = "msg"
)

// For returns the argv of the hook of class, or nil.
func (h *Hooks) For(class string) []string {
	switch class {
	case HookState:
		return h.State
	case HookMemory:
		return h.Memory
	case HookExec:
		return h.Exec
	case HookTools:
		return h.Tools
	case HookNet:
		return h.Net
	case HookMCP:
		return h.MCP
	case HookMsg:
		return h.Msg
	}
	return nil
}

// TimeoutOr is the hook's timeout.
func (h *Hooks) TimeoutOr() time.Duration {
	if h.Timeout <= 0 {
		return DefaultHookTimeout
	}
	return h.Timeout.D()
}

// check validates the [hooks] section.
func (h *Hooks) check(b []byte) error {
	for _, class := range []string{HookState, HookMemory, HookExec, HookTools, HookNet, HookMCP, HookMsg} {
		argv := h.For(class)
		if argv == nil {
			continue
		}
		if len(argv) == 0 || !filepath.IsAbs(argv[0]) || filepath.Clean(argv[0]) != argv[0] {
			return &Error{Line: lineOf(b, class+" ", class+"="), Reason: fmt.Sprintf("hooks.%s: give the program by its absolute path, then its arguments", class)}
		}
	}
	if h.Timeout < 0 {
		return &Error{Line: lineOf(b, "timeout"), Reason: "hooks.timeout may not be negative"}
	}
	return nil
}

// HookReason is what a hook printed, as a refusal quotes it: its first
// line, as valid UTF-8 without control characters, at most
// HookReasonMax bytes; "" when it printed nothing of it.
func HookReason(out []byte) string {
	line, _, _ := strings.Cut(string(out), "\n")
	var sb strings.Builder
	for _, r := range strings.ToValidUTF8(line, "?") {
		if unicode.IsControl(r) {
			r = '?'
		}
		if sb.Len()+utf8.RuneLen(r) > HookReasonMax {
			break
		}
		sb.WriteRune(r)
	}
	return strings.TrimSpace(sb.String())
}
