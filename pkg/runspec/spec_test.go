package runspec

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

func TestSpec(t *testing.T) {
	t.Setenv("OXIOS_TEST_KEY", "sk-1")
	l := config.LLM{Model: "m0", KeyEnv: "OXIOS_TEST_KEY"}
	r := Run{ID: "r1", Dir: "/w/a/r1", Argv: []string{"runner"}, Policy: policy.Default(), Wall: 1.5, Where: Where{Socket: "/s"}, LLM: l, SysEnv: []string{"OXIOS_SCHEDULE=j"}}
	s := Spec(proto.SpawnArgs{Agent: "a", Task: "do it", Input: "in"}, r)
	if s.ID != "r1" || s.Agent != "a" || s.Dir != "/w/a/r1" || s.Model != "m0" || !s.Records || s.Task != "do it" || string(s.Stdin) != "in" || s.Wall != 1500*time.Millisecond {
		t.Fatalf("LLM spec: %+v", s)
	}
	if !slices.Contains(s.Env, "OXIOS_SCHEDULE=j") || !slices.Contains(s.Env, "HOME=/w/a/r1") {
		t.Fatalf("LLM env: %v", s.Env)
	}
	// The key stays in oxiosd: the kernel calls the model (llm.chat).
	for _, e := range s.Env {
		if strings.Contains(e, "sk-1") {
			t.Fatalf("the endpoint's key is in an LLM run's environment: %s", e)
		}
	}
	s = Spec(proto.SpawnArgs{Agent: "a", Command: []string{"true"}, Task: "ignored", Model: "m1"}, r)
	if s.Records || s.Task != "" || s.Model != "m1" || slices.Contains(s.Env, "OXIOS_LLM_KEY=sk-1") {
		t.Fatalf("a command's spec has the LLM's: %+v", s)
	}
	Box(&s, nil, "/s")
	if s.Sandbox != nil || s.SocketAt != "" {
		t.Fatal("no sandbox: the spec stays as it is")
	}
	Box(&s, &sandbox.Spec{}, "/s")
	if s.Sandbox == nil || s.SocketAt != "/s" || !slices.Contains(s.Env, "HOME="+sandbox.WorkDir) {
		t.Fatalf("sandboxed: %+v", s)
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	n := 0
	id := NewID(func(id string) bool { n++; seen[id] = true; return n < 3 })
	if n != 3 || !seen[id] || len(seen) != 3 {
		t.Fatalf("a taken id is not retried: %d tries, %v", n, seen)
	}
	if len(id) != 10 || id[0] != 'r' || strings.Trim(id[1:], "abcdefghijklmnopqrstuvwxyz234567") != "" {
		t.Fatalf("id %q is not r and 9 base32 letters", id)
	}
}

func TestLimitErrno(t *testing.T) {
	if LimitErrno("fork refused") != proto.EAGAIN || LimitErrno("memory") != proto.ENOMEM {
		t.Fatal("a fork refused is EAGAIN, else ENOMEM")
	}
}
