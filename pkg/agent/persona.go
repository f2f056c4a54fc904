package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/share"
)

// Persona is a named system prompt with defaults for a run: shipped in
// share/personas/NAME.toml, or the agent's own in its state under
// personas/NAME (which comes first, and is versioned with the rest).
type Persona struct {
	Name        string   `toml:"-"`
	From        string   `toml:"-"` // "agent" or "shipped"
	Description string   `toml:"description"`
	System      string   `toml:"system"`
	Model       string   `toml:"model"`
	Temperature *float64 `toml:"temperature"`
	MaxTokens   int      `toml:"max_tokens"`
	// Tools, if set, are the only tools the model is offered (finish is
	// always offered).
	Tools []string `toml:"tools"`
	// Recall and Summary turn the run's memory off when false.
	Recall  *bool `toml:"recall"`
	Summary *bool `toml:"summary"`
}

// PersonaKey is the state key of an agent's persona NAME.
func PersonaKey(name string) string { return "personas/" + name }

// LoadPersona returns persona name: the agent's, else the shipped one.
func LoadPersona(ctx context.Context, k Kernel, name string) (*Persona, error) {
	if name == "" || strings.ContainsAny(name, "/\\ \t\n") || strings.HasPrefix(name, ".") {
		return nil, proto.Errorf(proto.EINVAL, "persona %q: want a name such as ops", name)
	}
	text, err := k.StateLoad(ctx, PersonaKey(name))
	from := "agent"
	if err != nil {
		var pe *proto.Error
		if !errors.As(err, &pe) || pe.Code != proto.ENOENT {
			return nil, err
		}
		text, err = fs.ReadFile(share.Personas, "personas/"+name+".toml")
		if err != nil {
			names, _ := ListPersonas(ctx, k)
			return nil, proto.Errorf(proto.ENOENT, "no persona %q (there are: %s; an agent's own goes in its state under %s)", name, strings.Join(names, ", "), PersonaKey(name))
		}
		from = "shipped"
	}
	p, err := ParsePersona(name, text)
	if err != nil {
		return nil, err
	}
	p.From = from
	return p, nil
}

// ParsePersona reads a persona's TOML; an unknown key is an error.
func ParsePersona(name string, text []byte) (*Persona, error) {
	p := &Persona{Name: name}
	md, err := toml.NewDecoder(bytes.NewReader(text)).Decode(p)
	if err != nil {
		return nil, proto.Errorf(proto.EINVAL, "persona %q: %v", name, err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		return nil, proto.Errorf(proto.EINVAL, "persona %q: unknown key %s (keys: description, system, model, temperature, max_tokens, tools, recall, summary)", name, u[0])
	}
	if t := p.Temperature; t != nil && (*t < 0 || *t > 2) {
		return nil, proto.Errorf(proto.EINVAL, "persona %q: temperature %v: want 0 to 2", name, *t)
	}
	if p.MaxTokens < 0 {
		return nil, proto.Errorf(proto.EINVAL, "persona %q: max_tokens %d: want 0 or more", name, p.MaxTokens)
	}
	return p, nil
}

// ListPersonas names the personas the agent may use, its own and the
// shipped ones.
func ListPersonas(ctx context.Context, k Kernel) ([]string, error) {
	seen := map[string]bool{}
	ents, _ := fs.ReadDir(share.Personas, "personas")
	for _, e := range ents {
		seen[strings.TrimSuffix(e.Name(), ".toml")] = true
	}
	recs, err := k.StateList(ctx, "personas/")
	for _, r := range recs {
		seen[strings.TrimPrefix(r.Key, "personas/")] = true
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, err
}

// Apply sets what the persona says in cfg, where the run's options have
// not said otherwise (set names the options given).
func (p *Persona) Apply(cfg *Config, set func(string) bool) {
	if p.System != "" && !set("system") {
		cfg.System = strings.TrimSpace(p.System)
	}
	if p.Model != "" && !set("model") {
		cfg.Model = p.Model
	}
	if p.Temperature != nil && !set("temperature") {
		t := float32(*p.Temperature)
		cfg.Temperature = &t
	}
	if p.MaxTokens > 0 && !set("max-tokens") {
		cfg.MaxTokens = p.MaxTokens
	}
	if len(p.Tools) > 0 {
		cfg.Tools = p.Tools
	}
	if p.Recall != nil && !*p.Recall && !set("recall") {
		cfg.Recall = -1
	}
	if p.Summary != nil && !*p.Summary {
		cfg.NoSummary = true
	}
}

func (p *Persona) String() string {
	return fmt.Sprintf("%s (%s): %s", p.Name, p.From, p.Description)
}
