package version

import (
	"context"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"

	"github.com/oxios/oxios/pkg/proto"
)

func TestPushAndCheckRemote(t *testing.T) {
	for _, bad := range []string{"", "-oProxyCommand=x", "a\xffb"} {
		if err := CheckRemote(bad); err == nil || err.Code != proto.EINVAL {
			t.Errorf("remote %q: %v", bad, err)
		}
	}
	if err := CheckRemote("file:///srv/oxios.git"); err != nil {
		t.Fatal(err)
	}
	r := open(t)
	remote := t.TempDir()
	if _, err := gogit.PlainInit(remote, true); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Push(context.Background(), remote); err == nil || err.(*proto.Error).Code != proto.ENOENT {
		t.Fatalf("push of nothing: %v", err)
	}
	cm := change(t, r, map[string][]byte{"agents/a/state/k": []byte("v\n")}, "one")
	rec, err := r.Push(context.Background(), remote)
	if err != nil || rec.Commit != cm.Hash || rec.UpToDate || rec.Type != proto.RecordPush || !strings.Contains(rec.Text, "pushed to "+remote) {
		t.Fatalf("%+v %v", rec, err)
	}
	rec, err = r.Push(context.Background(), remote)
	if err != nil || !rec.UpToDate || !strings.HasSuffix(rec.Text, remote+" has it already") {
		t.Fatalf("again: %+v %v", rec, err)
	}
}
