package agent

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/proto"
)

// What shapes a run's prompt and answer besides its task: a persona's
// variables (ox-spawn -v), fragments fetched from URLs (ox-spawn -f URL;
// a file's text comes in the run's context), and the JSON Schema its
// final answer must match (ox-spawn --schema).

var varRef = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

// FillVars fills each {{NAME}} of a persona's prompt with vars[NAME]. A
// {{NAME}} left without a value, or a value the prompt has no place for,
// is an error naming it: a typo must not send a prompt with a hole.
func FillVars(persona, text string, vars map[string]string) (string, error) {
	used := map[string]bool{}
	var missing []string
	out := varRef.ReplaceAllStringFunc(text, func(m string) string {
		name := varRef.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		used[name] = true
		return v
	})
	if len(missing) > 0 {
		return "", proto.Errorf(proto.EINVAL, "persona %s asks for {{%s}}: give --var %s=VALUE", persona, missing[0], missing[0])
	}
	var unused []string
	for name := range vars {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		if persona == "" {
			return "", proto.Errorf(proto.EINVAL, "--var %s: variables fill a persona's prompt, and the run has no persona (-P NAME)", unused[0])
		}
		return "", proto.Errorf(proto.EINVAL, "--var %s: persona %s has no {{%s}}", unused[0], persona, unused[0])
	}
	return out, nil
}

// fragments fetches the URL fragments through net.fetch (the agent's
// [net] policy decides) and says each to the model; a refused or failed
// fetch ends the run before any model call.
func (r *Runner) fragments(ctx context.Context) error {
	for _, url := range r.cfg.Fragments {
		rec, err := r.k.Fetch(ctx, proto.FetchArgs{URL: url})
		if err != nil {
			return fmt.Errorf("fragment %s: %w", url, err)
		}
		if rec.Status < 200 || rec.Status > 299 {
			return proto.Errorf(proto.EIO, "fragment %s: the server answered %d", url, rec.Status)
		}
		if rec.Encoding != "" {
			return proto.Errorf(proto.EINVAL, "fragment %s: %s is not text", url, rec.ContentType)
		}
		text := rec.Body
		if rec.Truncated {
			text += "\n(cut at the policy's net.max_bytes)"
		}
		r.say(openai.ChatMessageRoleUser, "Fragment "+url+":\n"+text)
	}
	return nil
}

// answerShape is how a final answer is held to the run's schema: the
// value it matched, or a message asking the model again, or the end of
// the run when it was asked enough.
func (r *Runner) answerShape(answer string) (value []byte, again bool, err error) {
	v, cerr := r.cfg.Schema.Check(answer)
	if cerr == nil {
		return v, false, nil
	}
	if r.reshaped < 2 {
		r.reshaped++
		r.say(openai.ChatMessageRoleUser, "Your answer must be only a JSON value matching this JSON Schema, with no other text: "+
			string(r.cfg.Schema.Raw())+"\n"+cerr.Error()+". Answer again.")
		return nil, true, nil
	}
	return nil, false, &Fatal{Code: proto.EBADMSG, Err: fmt.Errorf("%v (asked three times; --schema)", cerr)}
}

// result emits the answer's value as the run's result record.
func (r *Runner) result(v []byte) {
	text := string(v)
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	r.emit(&proto.ResultRecord{Type: proto.RecordResult, Value: v, Text: strings.TrimSpace(text)})
}
