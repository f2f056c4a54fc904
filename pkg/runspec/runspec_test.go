package runspec

import (
	"slices"
	"testing"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
)

// TestRunnerArgv: an LLM run's options reach the runner as options whose
// values cannot be taken for other options, and the task stays a task.
func TestRunnerArgv(t *testing.T) {
	temp := 0.0
	argv, err := RunnerArgv("/bin/ox-agent", proto.SpawnArgs{Task: "--url=http://evil/v1", Model: "m",
		LLM: &proto.LLMArgs{System: "--no-keep --url=http://evil/v1", Persona: "ops", Continue: true, Temperature: &temp, MaxTokens: 10, NoRecall: true}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/bin/ox-agent", "--model", "m", "--system=--no-keep --url=http://evil/v1", "--persona=ops", "--temperature=0", "--max-tokens=10", "--continue", "--no-recall", "--", "--url=http://evil/v1"}
	if !slices.Equal(argv, want) {
		t.Errorf("argv\n%q\nwant\n%q", argv, want)
	}
	for _, bad := range []proto.LLMArgs{
		{Persona: "../x"}, {Persona: "-x"}, {Conversation: "a/b"}, {Conversation: "--url"},
		{Continue: true, Conversation: "r1"}, {MaxTokens: -1}, {Temperature: ptr(2.5)},
	} {
		if _, err := RunnerArgv("r", proto.SpawnArgs{Task: "t", LLM: &bad}); err == nil || err.Code != proto.EINVAL {
			t.Errorf("%+v: %v, want EINVAL", bad, err)
		}
	}
}

func ptr(f float64) *float64 { return &f }

func TestRunnerEnv(t *testing.T) {
	l := config.Default().LLM
	l.BaseURL = "http://x/v1"
	env := RunnerEnv(l, "m")
	for _, e := range env {
		if e == "OXIOS_LLM_TEMPERATURE=-1" || e == "OXIOS_LLM_MAX_TOKENS=0" {
			t.Errorf("%s: the defaults send none", e)
		}
	}
	if slices.Contains(env, "OXIOS_LLM_URL=http://x/v1") || !slices.Contains(env, "OXIOS_LLM_MODEL=m") {
		t.Errorf("env %q", env)
	}
	l.Temperature, l.MaxTokens = 0, 100
	env = RunnerEnv(l, "m")
	if !slices.Contains(env, "OXIOS_LLM_TEMPERATURE=0") || !slices.Contains(env, "OXIOS_LLM_MAX_TOKENS=100") {
		t.Errorf("env %q", env)
	}
}

func TestRunnable(t *testing.T) {
	code := func(err error) string {
		if pe, ok := err.(*proto.Error); ok {
			return pe.Code
		}
		return ""
	}
	if err := Runnable(nil, ""); code(err) != proto.ENOEXEC {
		t.Fatal(err)
	}
	if err := Runnable(nil, "http://127.0.0.1:1/v1"); err != nil {
		t.Fatal(err)
	}
	if err := Runnable([]string{"/bin/true"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := Runnable([]string{"sub/prog"}, ""); code(err) != proto.EINVAL {
		t.Fatal(err)
	}
}
