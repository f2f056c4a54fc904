package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/skill"
)

// skillTool is the function the model loads a skill's instructions with.
const skillTool = "skill_load"

// skillStore is skill.Store over the runner's kernel: it only reads.
type skillStore struct{ k Kernel }

func (s skillStore) List(ctx context.Context, prefix string, fn func(proto.StateRecord) error) error {
	recs, err := s.k.StateList(ctx, prefix)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (s skillStore) Load(ctx context.Context, key string) ([]byte, error) {
	return s.k.StateLoad(ctx, key)
}

func (skillStore) Save(context.Context, string, []byte) error {
	return proto.Errorf(proto.EPERM, "the runner does not install skills")
}

func (skillStore) Delete(context.Context, string) error {
	return proto.Errorf(proto.EPERM, "the runner does not remove skills")
}

// skills lists the agent's usable skills once per run: the prompt shows
// their names and descriptions, and skill_load is offered only if there
// are any. A skill that does not parse is left out (ox-skill ls says
// why); so are all of them when the policy does not let the run read
// skills/.
func (r *Runner) skills(ctx context.Context) []*skill.Installed {
	list, err := skill.List(ctx, skillStore{r.k})
	if err != nil {
		return nil
	}
	out := list[:0]
	for _, in := range list {
		if in.Err == nil {
			out = append(out, in)
		}
	}
	return out
}

// skillsPrompt is the system message that tells the model what skills it
// has: one line each, the instructions left for skill_load.
func skillsPrompt(list []*skill.Installed) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("You have skills: instructions for particular kinds of task. When a task matches a skill's description, call skill_load with its name first and follow what it says.\n")
	for _, in := range list {
		b.WriteString(in.Summary() + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func skillToolDef(list []*skill.Installed) openai.Tool {
	names := make([]string, len(list))
	for i, in := range list {
		names[i] = in.Name
	}
	enum, _ := json.Marshal(names)
	return openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name:        skillTool,
		Description: "Load the instructions of one of your skills (listed in the system prompt), and the names of its files.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","enum":` + string(enum) + `}},"required":["name"]}`),
	}}
}

// loadSkill answers skill_load: the skill's instructions, read now from
// the agent's state (a state.load, policy-checked and audited like any
// other), and where its other files are.
func (r *Runner) loadSkill(ctx context.Context, args string) (string, error) {
	var a struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(args)), &a); err != nil || a.Name == "" {
		return "", toolErrorf("%s: give the name of a skill, as {\"name\": \"...\"}", skillTool)
	}
	sk, err := skill.Get(ctx, skillStore{r.k}, a.Name)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Skill %s: %s\n\n%s", sk.Name, sk.Description, sk.Body)
	recs, err := r.k.StateList(ctx, skill.Prefix+sk.Name+"/")
	if err == nil && len(recs) > 1 {
		b.WriteString("\n\nFiles of this skill (read them with state_read):\n")
		for _, rec := range recs {
			if !strings.HasSuffix(rec.Key, "/"+skill.File) {
				fmt.Fprintf(&b, "- %s (%d bytes)\n", rec.Key, rec.Size)
			}
		}
	}
	return clip(b.String()), nil
}
