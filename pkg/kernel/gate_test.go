package kernel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// TestGateSameForEveryEntry: the socket's syscalls (StateSave, StateDelete,
// StateLoad) and the mount's (MayWrite, StateSubmit, StateDeleteSubmit,
// StateOpen) refuse and accept the same agents and keys with the same
// codes, and audit every refusal.
func TestGateSameForEveryEntry(t *testing.T) {
	k := testKernel(t, t.TempDir(), nil)
	defer k.Close()
	ctx := context.Background()
	admin := &Cred{Admin: true}
	other := &Cred{UID: 4242, Grants: []string{"mine-*"}}
	cases := []struct {
		c          *Cred
		agent, key string
		save, read string // the codes of a save and of a read ("" = ok)
	}{
		{admin, "ops", "notes/today.md", "", ""},
		{admin, "ops", ".gitmodules", proto.EINVAL, ""},
		{admin, "ops", "proj/.git/config", proto.EINVAL, ""},
		{admin, "ops", "proj/.GIT./x", proto.EINVAL, ""},
		{admin, "ops", "GITMOD~1", proto.EINVAL, ""},
		{admin, "ops", "a/../b", proto.EINVAL, proto.EINVAL},
		{admin, "ops", "/abs", proto.EINVAL, proto.EINVAL},
		{admin, "ops", "", proto.EINVAL, proto.EINVAL},
		{admin, "ops", "nul\x00", proto.EINVAL, proto.EINVAL},
		{admin, "ops", strings.Repeat("k", proto.MaxKeyLen+1), proto.ENAMETOOLONG, proto.ENAMETOOLONG},
		{admin, "Bad", "k", proto.EINVAL, proto.EINVAL},
		{admin, "", "k", proto.EINVAL, proto.EINVAL},
		{other, "ops", "k", proto.EPERM, proto.EPERM},
		{other, "mine-1", "k", "", ""},
	}
	for _, tc := range cases {
		name := tc.agent + ":" + tc.key
		_, err := k.StateSave(ctx, tc.c, proto.StateSaveArgs{Agent: tc.agent, Key: tc.key, Value: "v"}, nil)
		if got := code(err); got != tc.save {
			t.Errorf("%q: state.save: %q (%v), want %q", name, got, err, tc.save)
		}
		if got := code(k.MayWrite(tc.c, tc.agent, tc.key)); got != tc.save {
			t.Errorf("%q: mount open for writing: %q, want %q", name, got, tc.save)
		}
		_, err = k.StateSubmit(tc.c, tc.agent, tc.key, []byte("v"), nil).Wait()
		if got := code(err); got != tc.save {
			t.Errorf("%q: mount save: %q (%v), want %q", name, got, err, tc.save)
		}
		_, _, err = k.StateLoad(ctx, tc.c, proto.StateArgs{Agent: tc.agent, Key: tc.key}, nil)
		wantLoad := tc.read
		if wantLoad == "" && tc.save != "" {
			wantLoad = proto.ENOENT // never saved
		}
		if got := code(err); got != wantLoad {
			t.Errorf("%q: state.load: %q (%v), want %q", name, got, err, wantLoad)
		}
		_, _, _, err = k.StateOpen(ctx, tc.c, tc.agent, tc.key)
		if got := code(err); got != wantLoad {
			t.Errorf("%q: mount open for reading: %q (%v), want %q", name, got, err, wantLoad)
		}
		_, err = k.StateDelete(ctx, tc.c, proto.StateArgs{Agent: tc.agent, Key: tc.key}, nil)
		sockDel := code(err)
		k.StateSave(ctx, tc.c, proto.StateSaveArgs{Agent: tc.agent, Key: tc.key, Value: "v"}, nil)
		_, err = k.StateDeleteSubmit(tc.c, tc.agent, tc.key, nil).Wait()
		if got := code(err); got != sockDel {
			t.Errorf("%q: state.delete: %q, mount unlink: %q", name, sockDel, got)
		}
	}
	// Every refusal is on the log: the refused saves, by both paths. The
	// same refusal again within a second is counted in a summary entry
	// (audit.Coalescer): flush the summaries, and let a save that waits
	// for its commit come after them in the committer's queue.
	k.refusals.Flush()
	if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "ops", Key: "after-refusals", Value: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	refused := map[string]int{}
	err := k.AuditLog(ctx, admin, proto.AuditLogArgs{Op: proto.OpStateSave}, nil, func(line []byte) error {
		var e struct {
			Target, Result string
			Count          int
		}
		if json.Unmarshal(line, &e) == nil && e.Result != "ok" {
			refused[e.Target] += max(e.Count, 1)
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		tgt := strings.ToValidUTF8(tc.agent+":"+tc.key, "?")
		if tc.save != "" && refused[tgt] < 3 { // state.save, open, close
			t.Errorf("%q: %d refused saves audited, want 3", tgt, refused[tgt])
		}
	}
}
