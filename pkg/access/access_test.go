package access

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
)

// accessOf loads an [access] table the way oxiosd does.
func accessOf(t *testing.T, table string) *config.Access {
	t.Helper()
	file := filepath.Join(t.TempDir(), "oxios.toml")
	if err := os.WriteFile(file, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, true)
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Access
}

type runs map[int32][2]string

func (r runs) Attribute(uid uint32, pid int32) (string, string, error) {
	if pid < 0 {
		return "", "", errors.New("a sandbox that cannot be named")
	}
	ar := r[pid]
	return ar[0], ar[1], nil
}

func TestIdentify(t *testing.T) {
	acc := accessOf(t, "[access]\nadmins = [4000]\n[access.users]\n\"3000\" = [\"team-*\"]\n")
	rs := runs{7: {"alpha", "r1"}}
	for _, tc := range []struct {
		name    string
		uid     uint32
		pid     int32
		want    Cred
		refused string
	}{
		{name: "root", uid: 0, pid: 1, want: Cred{UID: 0, PID: 1, Admin: true}},
		{name: "the daemon's user", uid: 1234, pid: 1, want: Cred{UID: 1234, PID: 1, Admin: true}},
		{name: "an admin by config", uid: 4000, pid: 1, want: Cred{UID: 4000, PID: 1, Admin: true}},
		{name: "a granted user", uid: 3000, pid: 1, want: Cred{UID: 3000, PID: 1, Grants: []string{"team-*"}}},
		{name: "a run, even of root", uid: 0, pid: 7, want: Cred{UID: 0, PID: 7, Agent: "alpha", Run: "r1"}},
		{name: "a stranger", uid: 5000, pid: 1, refused: "uid=5000"},
		{name: "an unnamed sandbox", uid: 0, pid: -2, refused: "uid=0 pid=-2"},
	} {
		c, refused, err := Identify(tc.uid, 10, tc.pid, 1234, rs, acc)
		if tc.refused != "" {
			if err == nil || err.Code != proto.EACCES || refused != tc.refused {
				t.Errorf("%s: %v %q, want EACCES for %q", tc.name, err, refused, tc.refused)
			}
			continue
		}
		tc.want.GID = 10
		if err != nil || c.UID != tc.want.UID || c.PID != tc.want.PID || c.GID != 10 || c.Admin != tc.want.Admin ||
			c.Agent != tc.want.Agent || c.Run != tc.want.Run || len(c.Grants) != len(tc.want.Grants) {
			t.Errorf("%s: %+v %v, want %+v", tc.name, c, err, tc.want)
		}
	}
}

func TestAuthorize(t *testing.T) {
	admin := &Cred{Admin: true}
	run := &Cred{UID: 1000, Agent: "alpha", Run: "r1"}
	user := &Cred{UID: 3000, Grants: []string{"team-*"}}
	for _, tc := range []struct {
		c     *Cred
		agent string
		code  string // "" when allowed
	}{
		{admin, "anything", ""},
		{run, "alpha", ""},
		{run, "beta", proto.EPERM},
		{user, "team-a", ""},
		{user, "other", proto.EPERM},
		{admin, "../x", proto.EINVAL},
	} {
		got := ""
		if err := tc.c.Authorize(tc.agent); err != nil {
			got = err.Code
		}
		if got != tc.code {
			t.Errorf("%+v on %q: %q, want %q", tc.c, tc.agent, got, tc.code)
		}
	}
	if a := run.Actor(); a.UID != 1000 || a.Agent != "alpha" || a.Run != "r1" {
		t.Errorf("actor %+v", a)
	}
}

// A caller reads the entries about its agents or made by them.
func TestReads(t *testing.T) {
	run := &Cred{UID: 1000, Agent: "alpha", Run: "r1"}
	for _, tc := range []struct {
		c    *Cred
		in   audit.Info
		want bool
	}{
		{&Cred{Admin: true}, audit.Info{Target: "beta:k"}, true},
		{run, audit.Info{Target: "alpha:k"}, true},
		{run, audit.Info{Target: "beta:k"}, false},
		{run, audit.Info{Target: "beta:k", Actor: audit.Actor{Agent: "alpha"}}, true},
		{&Cred{UID: 3000, Grants: []string{"team-*"}}, audit.Info{Target: "team-a"}, true},
		{&Cred{UID: 3000, Grants: []string{"team-*"}}, audit.Info{Target: "*"}, false},
	} {
		if got := tc.c.Reads(&tc.in); got != tc.want {
			t.Errorf("%+v reads %+v: %v, want %v", tc.c, tc.in, got, tc.want)
		}
	}
}

func TestListsSeesNotAdmin(t *testing.T) {
	admin := &Cred{Admin: true}
	run := &Cred{UID: 1000, Agent: "alpha", Run: "r1"}
	user := &Cred{UID: 3000, Grants: []string{"team-*"}}
	if !user.Lists("")("team-a") || user.Lists("")("other") || user.Lists("team-b")("team-a") || !user.Lists("team-b")("team-b") {
		t.Error("a user's listing")
	}
	if !admin.Lists("")("x") || admin.Lists("y")("x") || run.Lists("")("beta") {
		t.Error("the admin's or a run's listing")
	}
	if !admin.Sees("") || !admin.Sees("x") || user.Sees("") || !user.Sees("team-a") || user.Sees("other") || !run.Sees("alpha") {
		t.Error("events seen")
	}
	if got := run.NotAdmin(); got != `run r1 of agent "alpha" is not the admin` {
		t.Error(got)
	}
	if got := user.NotAdmin(); got != "uid 3000 is not the admin" {
		t.Error(got)
	}
}
