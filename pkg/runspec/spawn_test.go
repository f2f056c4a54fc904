package runspec

import (
	"slices"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

func TestCheckSpawn(t *testing.T) {
	for _, c := range []struct {
		a    proto.SpawnArgs
		want string // "" ok, else part of the message
	}{
		{proto.SpawnArgs{Task: "hi"}, ""},
		{proto.SpawnArgs{Command: []string{"true"}, Env: []string{"A=1"}}, ""},
		{proto.SpawnArgs{Task: "  "}, "nothing to run"},
		{proto.SpawnArgs{Task: "hi", Command: []string{"true"}}, "not both"},
		{proto.SpawnArgs{Task: "hi", Env: []string{"A"}}, "want NAME=VALUE"},
		{proto.SpawnArgs{Task: "hi", Env: []string{"A B=1"}}, "want NAME=VALUE"},
		{proto.SpawnArgs{Task: "hi", Env: []string{"OXIOS_RUN=x"}}, "set by oxiosd"},
	} {
		err := CheckSpawn(c.a)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.a, err)
		case c.want != "" && (err == nil || err.Code != proto.EINVAL || !strings.Contains(err.Message, c.want)):
			t.Errorf("%+v: %v, want EINVAL %q", c.a, err, c.want)
		}
	}
}

func TestArgv(t *testing.T) {
	l := config.LLM{BaseURL: "http://model"}
	argv, err, _ := Argv(proto.SpawnArgs{Agent: "a", Task: "hi"}, l, "/opt/ox-agent")
	if err != nil || !slices.Equal(argv, []string{"/opt/ox-agent", "--", "hi"}) {
		t.Errorf("LLM run: %q %v", argv, err)
	}
	if _, err, refused := Argv(proto.SpawnArgs{Agent: "a", Task: "hi"}, config.LLM{}, "/opt/ox-agent"); err == nil || err.Code != proto.ENOEXEC || !refused {
		t.Errorf("no endpoint: %v %v", err, refused)
	}
	o := &proto.LLMArgs{Continue: true, Conversation: "r-1"}
	if _, err, refused := Argv(proto.SpawnArgs{Agent: "a", Task: "hi", LLM: o}, l, "/opt/ox-agent"); err == nil || refused {
		t.Errorf("bad options: %v %v", err, refused)
	}
	argv, err, _ = Argv(proto.SpawnArgs{Agent: "a", Command: []string{"sh", "-c", "x"}}, l, "")
	if err != nil || !strings.HasSuffix(argv[0], "/sh") || !slices.Equal(argv[1:], []string{"-c", "x"}) {
		t.Errorf("command: %q %v", argv, err)
	}
	if _, err, refused := Argv(proto.SpawnArgs{Agent: "a", Command: []string{"no-such-command-here"}}, l, ""); err == nil || !refused {
		t.Errorf("no such command: %v %v", err, refused)
	}
	if _, err, refused := Argv(proto.SpawnArgs{Agent: "a", Command: []string{"sh"}, LLM: &proto.LLMArgs{}}, l, ""); err == nil || refused {
		t.Errorf("LLM options for a command: %v %v", err, refused)
	}
}

func TestEnv(t *testing.T) {
	a := proto.SpawnArgs{Agent: "a", Task: "hi", Env: []string{"MINE=1"}}
	env := Env(a, "r1", "/w/r1", Where{Socket: "/s", Mount: "/m"}, config.LLM{BaseURL: "http://model"}, "m1", []string{"OXIOS_SCHEDULE=j"})
	for _, want := range []string{"HOME=/w/r1", "OXIOS_AGENT=a", "OXIOS_RUN=r1", "OXIOS_SOCKET=/s", "OXIOS_MNT=/m", "OXIOS_LLM_MODEL=m1", "OXIOS_SCHEDULE=j"} {
		if !slices.Contains(env, want) {
			t.Errorf("%s missing from %q", want, env)
		}
	}
	// The endpoint and its key are the kernel's (llm.chat).
	for _, e := range env {
		if strings.HasPrefix(e, "OXIOS_LLM_KEY=") || strings.HasPrefix(e, "OXIOS_LLM_URL=") {
			t.Errorf("%s in an LLM run's environment", e)
		}
	}
	if env[len(env)-1] != "MINE=1" {
		t.Errorf("the spawn's own variables are not last: %q", env)
	}
	cmd := Env(proto.SpawnArgs{Agent: "a", Command: []string{"true"}}, "r2", "/w", Where{Socket: "/s"}, config.LLM{}, "", nil)
	for _, e := range cmd {
		if strings.HasPrefix(e, "OXIOS_LLM") || strings.HasPrefix(e, "OXIOS_MNT") {
			t.Errorf("a command run without a mount has %s", e)
		}
	}
	SandboxHome(cmd)
	if !slices.Contains(cmd, "HOME="+sandbox.WorkDir) {
		t.Errorf("sandbox home: %q", cmd)
	}
}

func TestSandbox(t *testing.T) {
	p := policy.Default()
	h := Host{Features: sandbox.Features{Namespaces: true, Seccomp: true}, Root: "/r", Data: "/var/lib/oxios", Socket: "/run/oxios.sock", Mount: "/run/oxios/mnt"}
	if p.Sandbox.Isolation == policy.IsolationNone {
		t.Skip("the default policy has no sandbox")
	}
	sp, err := Sandbox(h, "a", p, "/w", false, true)
	if err != nil || sp == nil {
		t.Fatalf("sandbox: %v %v", sp, err)
	}
	if last := sp.Binds[len(sp.Binds)-1]; last.Path != "/run/oxios/mnt/agent/a" {
		t.Errorf("a run does not see its agent's folder of the mount: %+v", sp.Binds)
	}
	p.Sandbox.ReadOnly = []string{"/var/lib"}
	if _, err := Sandbox(h, "a", p, "/w", false, true); err == nil || err.Code != proto.EPERM {
		t.Errorf("a path over oxiosd's data: %v", err)
	}
	for _, c := range [][2]string{{"/a", "/a"}, {"/a/b", "/a"}, {"/a", "/a/b"}, {"/x", "/"}} {
		if !overlaps(c[0], c[1]) {
			t.Errorf("%s and %s do not overlap", c[0], c[1])
		}
	}
	if overlaps("/ab", "/a") {
		t.Error("/ab overlaps /a")
	}
}

func TestBoxed(t *testing.T) {
	if got := WorkDir("/d", "a", "r1"); got != "/d/work/a/r1" {
		t.Fatal(got)
	}
	p := policy.Default()
	p.Sandbox.Isolation = policy.IsolationFull
	h := Host{Features: sandbox.Features{Namespaces: true, Seccomp: true}, Root: "/r", Data: "/var/lib/oxios", Socket: "/run/oxios.sock"}
	r := Run{ID: "r1", Dir: "/d/work/a/r1", Argv: []string{"/bin/true"}, Policy: p}
	spec, err := Boxed(proto.SpawnArgs{Agent: "a", Command: []string{"true"}}, r, h, "/run/oxios.sock")
	if err != nil || spec.Sandbox == nil || spec.SocketAt != "/run/oxios.sock" || spec.Dir != r.Dir || spec.ID != "r1" {
		t.Fatalf("%+v %v", spec, err)
	}
	// The machine lacks the sandbox the policy asks for: refused.
	if _, err := Boxed(proto.SpawnArgs{Agent: "a", Command: []string{"true"}}, r, Host{}, "/run/oxios.sock"); err == nil || err.Code != proto.EPERM {
		t.Fatalf("no sandbox: %v", err)
	}
	p.Sandbox.Isolation = policy.IsolationNone
	if spec, err := Boxed(proto.SpawnArgs{Agent: "a", Command: []string{"true"}}, r, Host{}, "/s"); err != nil || spec.Sandbox != nil {
		t.Fatalf("%+v %v", spec.Sandbox, err)
	}
}
