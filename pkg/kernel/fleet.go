package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/oxios/oxios/pkg/proto"
)

// Fleet is what the kernel asks of the fleet it joined (pkg/fleet, issue
// 24): the nodes, a call carried to other nodes, and the audit heads the
// peers witnessed. A daemon alone has none, and its fleet ops answer
// ENOTCONN.
type Fleet interface {
	Nodes(ctx context.Context) ([]proto.NodeRecord, error)
	// Call runs a.Op on a.Node (or every node) with c's identity, sending
	// each record with its node; the result is a unary op's record.
	Call(ctx context.Context, c *Cred, a proto.FleetCallArgs, emit func(rec []byte) error) (json.RawMessage, error)
	// Witness checks the local chain against the heads each peer holds.
	Witness(ctx context.Context, emit func(*proto.WitnessRecord) error) error
}

// SetFleet joins the kernel to a fleet; called once, before serving.
func (k *Kernel) SetFleet(f Fleet) { k.fleet = f }

func (k *Kernel) noFleet(op string) *proto.Error {
	return proto.Errorf(proto.ENOTCONN, "%s: this oxiosd is not in a fleet (name NATS servers in [fleet] servers of oxios.toml; see oxiosd(8))", op)
}

// FleetStatus lists the nodes of the fleet.
func (k *Kernel) FleetStatus(ctx context.Context, c *Cred, _ struct{}, _ []byte, emit func(*proto.NodeRecord) error) error {
	if k.fleet == nil {
		return k.noFleet(proto.OpFleetStatus)
	}
	nodes, err := k.fleet.Nodes(ctx)
	if err != nil {
		return err
	}
	for i := range nodes {
		if err := emit(&nodes[i]); err != nil {
			return err
		}
	}
	return nil
}

// FleetCall carries an op to other nodes, whose kernels check it as their
// own callers' (the identity travels with it: the NATS credentials are
// the boundary of the fleet). Only the ops of proto.FleetCallable travel.
func (k *Kernel) FleetCall(ctx context.Context, c *Cred, a proto.FleetCallArgs, raw []byte, emit func([]byte) error) (json.RawMessage, error) {
	if !proto.FleetCallable[a.Op] {
		err := proto.Errorf(proto.EINVAL, "fleet.call: op %q does not go to other nodes (those that do: ps, events, audit log and tail, resources, status, spawn, attach, wait, kill)", a.Op)
		k.Refused(c, proto.OpFleetCall, "fleet:"+a.Op, raw, err.Code)
		return nil, err
	}
	if a.Node == "" {
		return nil, proto.Errorf(proto.EINVAL, "fleet.call: no node (a node's name, %q for all, %q for any with capacity)", proto.FleetAll, proto.FleetAny)
	}
	if k.fleet == nil {
		return nil, k.noFleet(proto.OpFleetCall)
	}
	return k.fleet.Call(ctx, c, a, emit)
}

// FleetWitness checks the local audit chain against its heads as the peers
// saw them.
func (k *Kernel) FleetWitness(ctx context.Context, c *Cred, _ struct{}, _ []byte, emit func(*proto.WitnessRecord) error) error {
	if err := k.requireAdmin(c, proto.OpFleetWitness); err != nil {
		return err
	}
	if k.fleet == nil {
		return k.noFleet(proto.OpFleetWitness)
	}
	return k.fleet.Witness(ctx, emit)
}

// ServeFleet runs a call a peer carried here, as the socket server runs
// one: the op's own checks, policy and audit apply to c.
func (k *Kernel) ServeFleet(ctx context.Context, c *Cred, op string, args json.RawMessage, out Out) (json.RawMessage, error) {
	sc := syscalls[op]
	if !proto.FleetCallable[op] || sc == nil || sc.Serve == nil {
		return nil, proto.Errorf(proto.EINVAL, "fleet.call: op %q does not go to other nodes", op)
	}
	return sc.Serve(k, ctx, c, &Request{Op: op, Args: args, Out: out})
}

func serveFleetCall(k *Kernel, ctx context.Context, c *Cred, r *Request) (json.RawMessage, error) {
	var a proto.FleetCallArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	// A followed call (events, attach) lasts until the client goes.
	return k.FleetCall(r.Out.Follow(), c, a, r.Args, flushed(r.Out))
}

// VersionPush pushes the branch of the versioned tree, with its tags, to
// a git remote (go-git: ssh, git, http(s), file). The push is audited,
// with the remote as its target; credentials come from the daemon's
// environment (an ssh agent, ~/.ssh of its user), never from the caller.
func (k *Kernel) VersionPush(ctx context.Context, c *Cred, a proto.PushArgs, raw []byte) (proto.PushRecord, error) {
	if err := k.requireAdmin(c, proto.OpVersionPush); err != nil {
		return proto.PushRecord{}, err
	}
	if a.Remote == "" || strings.HasPrefix(a.Remote, "-") || proto.CheckText([]byte(a.Remote)) != nil {
		return proto.PushRecord{}, proto.Errorf(proto.EINVAL, "version.push: remote %q: want a git URL (ssh://host/path, file:///path, user@host:path) or a repository's path", a.Remote)
	}
	target := "*:" + a.Remote
	rec, err := k.push(ctx, a.Remote)
	if err != nil {
		k.commitAudit(c, proto.OpVersionPush, target, raw, errCode(err), "", nil)
		return rec, err
	}
	_, err = k.commitAudit(c, proto.OpVersionPush, target+" "+rec.Commit, raw, "ok", "", nil)
	return rec, err
}

func (k *Kernel) push(ctx context.Context, remote string) (proto.PushRecord, error) {
	rec := proto.PushRecord{Type: proto.RecordPush, Remote: remote}
	var err error
	// A commit may land between the listing of packs and the ref read
	// (the committer writes packs go-git did not list): once more.
	for try := 0; try < 2; try++ {
		var r *git.Repository
		r, err = git.PlainOpen(k.ver.repo.Dir())
		if err != nil {
			return rec, ioError(err)
		}
		var head *plumbing.Reference
		head, err = r.Head()
		if err != nil {
			return rec, proto.Errorf(proto.ENOENT, "version.push: nothing committed yet (ox-commit first): %v", err)
		}
		rec.Ref, rec.Commit = head.Name().String(), head.Hash().String()
		spec := gitconfig.RefSpec("+" + rec.Ref + ":" + rec.Ref)
		// An anonymous remote: nothing is written to the repository's
		// config (Repository.Push wants a named one).
		rem := git.NewRemote(r.Storer, &gitconfig.RemoteConfig{Name: "push", URLs: []string{remote}})
		err = rem.PushContext(ctx, &git.PushOptions{RemoteName: "push", RefSpecs: []gitconfig.RefSpec{spec, "+refs/tags/*:refs/tags/*"}})
		if errors.Is(err, git.NoErrAlreadyUpToDate) {
			rec.UpToDate, err = true, nil
		}
		if err == nil {
			break
		}
	}
	if err != nil {
		return rec, proto.Errorf(proto.EIO, "version.push to %s: %v", remote, err)
	}
	rec.Text = fmt.Sprintf("%s %.12s pushed to %s", rec.Ref, rec.Commit, remote)
	if rec.UpToDate {
		rec.Text = fmt.Sprintf("%s %.12s: %s has it already", rec.Ref, rec.Commit, remote)
	}
	return rec, nil
}
