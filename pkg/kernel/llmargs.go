package kernel

import (
	"strconv"
	"strings"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
)

// runnerArgv is the command line of the LLM runner for a: its options,
// then the task after "--" (so a task that starts with a dash is a task).
func runnerArgv(runner string, a proto.SpawnArgs) ([]string, *proto.Error) {
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
		for _, b := range []struct {
			flag string
			on   bool
		}{{"continue", o.Continue}, {"no-recall", o.NoRecall}, {"no-summary", o.NoSummary}, {"no-keep", o.NoKeep}} {
			if b.on {
				argv = append(argv, "--"+b.flag)
			}
		}
	}
	return append(argv, "--", a.Task), nil
}

// runnerEnv is the environment that tells the runner the [llm] config.
func runnerEnv(l config.LLM, model string) []string {
	env := []string{"OXIOS_LLM_URL=" + l.BaseURL, "OXIOS_LLM_MODEL=" + model,
		"OXIOS_LLM_TIMEOUT=" + l.Timeout, "OXIOS_LLM_FIRST_TOKEN_TIMEOUT=" + l.FirstTokenTimeout,
		"OXIOS_LLM_RETRIES=" + strconv.Itoa(l.Retries)}
	if l.MaxTokens > 0 {
		env = append(env, "OXIOS_LLM_MAX_TOKENS="+strconv.Itoa(l.MaxTokens))
	}
	if l.Temperature >= 0 {
		env = append(env, "OXIOS_LLM_TEMPERATURE="+strconv.FormatFloat(l.Temperature, 'g', -1, 64))
	}
	return env
}
