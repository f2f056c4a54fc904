package integration

import (
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/share"
)

// TestPolicyModels: [llm] models in an agent's policy names the models
// its runs may ask for. The kernel refuses any other at llm.chat, before
// the endpoint is asked: EPERM naming the model and the rule, audited,
// and the run ends with exit 77; ox-policy check answers the same, and
// ox-policy show shows the rule.
func TestPolicyModels(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "[models.small]\nmodel = \"tiny-1\"\n", llmtest.Turn{Content: "ok", Repeat: -1})
	pol := writePolicy(t, string(share.DefaultPolicy)+"\n[llm]\nmodels = [\"small\", \"meta-llama/*\"]\n")
	if r := d.ox("", "ox-policy", "set", "-a", "ops", pol); r.code != 0 {
		t.Fatalf("ox-policy set: %d %s", r.code, r.stderr)
	}
	if r := d.ox("", "ox-policy", "show", "-a", "ops"); !strings.Contains(r.stdout, `models = ["small", "meta-llama/*"]`) {
		t.Fatalf("ox-policy show does not show the rule:\n%s", r.stdout)
	}
	// The default model, test-model, is not on the list.
	r := d.ox("", "ox-spawn", "-a", "ops", "-n", "--no-memory", "hello")
	if r.code != 77 || !strings.Contains(r.stdout, `model \"test-model\" is not on the policy's llm.models list (small, meta-llama/*)`) || !strings.Contains(r.stdout, "llm.models") {
		t.Fatalf("a model off the list: exit %d, want 77 naming the model and the rule\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("the endpoint was asked %d times for a refused model", n)
	}
	if a := d.ox("", "ox-audit", "log", "--json"); !strings.Contains(a.stdout, `"target":"ops:test-model [llm.models]"`) || !strings.Contains(a.stdout, `"result":"EPERM"`) {
		t.Fatalf("the refusal is not audited:\n%s", a.stdout)
	}
	// On the list, by name or glob: asked of the endpoint.
	for _, m := range []string{"small", "meta-llama/Llama-3-8B"} {
		if r := d.ox("", "ox-spawn", "-a", "ops", "-n", "--no-memory", "-m", m, "hello"); r.code != 0 {
			t.Fatalf("-m %s: exit %d\n%s\n%s", m, r.code, r.stdout, r.stderr)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Body.Model != "tiny-1" || reqs[1].Body.Model != "meta-llama/Llama-3-8B" {
		t.Fatalf("the models asked: %d calls", len(reqs))
	}
	// The dry run answers as the call did.
	for _, c := range []struct {
		model string
		code  int
	}{{"test-model", 77}, {"small", 0}, {"meta-llama/x", 0}, {"big", 77}} {
		r := d.ox("", "ox-policy", "check", "-a", "ops", "model", c.model)
		if r.code != c.code || c.code == 77 && !strings.Contains(r.stdout+r.stderr, "llm.models") {
			t.Errorf("ox-policy check model %s: exit %d, want %d\n%s%s", c.model, r.code, c.code, r.stdout, r.stderr)
		}
	}
	if r := d.ox("", "ox-policy", "check", "-a", "ops", "llm.chat", "small"); r.code != 0 {
		t.Errorf("ox-policy check llm.chat small: exit %d %s", r.code, r.stderr)
	}
	// ox-agent --models -a says which the agent may ask for.
	allowed := map[string]any{}
	for _, m := range records(t, d.ox("", "ox-agent", "--models", "-a", "ops", "--json").stdout) {
		allowed[m["name"].(string)] = m["allowed"]
	}
	if allowed["test-model"] != false || allowed["small"] != true {
		t.Errorf("ox-agent --models -a ops: allowed %v", allowed)
	}
	// Replayed against a policy with small alone, the call of the
	// meta-llama model would be refused now; the refused call allowed.
	export := d.ox("", "ox-audit", "export")
	only := writePolicy(t, string(share.DefaultPolicy)+"\n[llm]\nmodels = [\"small\", \"test-model\"]\n")
	r = d.ox(export.stdout, "ox-policy", "test", "-a", "ops", "--json", only)
	if r.code != 1 || !strings.Contains(r.stdout, "meta-llama/Llama-3-8B") || !strings.Contains(r.stdout, "llm.models") || !strings.Contains(r.stdout, "refused then, allowed now") {
		t.Errorf("ox-policy test of llm.models: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
