package version

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/oxios/oxios/pkg/proto"
)

// CheckRemote checks the remote a version.push names.
func CheckRemote(remote string) *proto.Error {
	if remote == "" || strings.HasPrefix(remote, "-") || proto.CheckText([]byte(remote)) != nil {
		return proto.Errorf(proto.EINVAL, "version.push: remote %q: want a git URL (ssh://host/path, file:///path, user@host:path) or a repository's path", remote)
	}
	return nil
}

// Push pushes the repository's branch, with its tags, to remote (go-git:
// ssh, git, http(s), file), with the credentials of the daemon's
// environment (an ssh agent, ~/.ssh of its user).
func (r *Repo) Push(ctx context.Context, remote string) (proto.PushRecord, error) {
	rec := proto.PushRecord{Type: proto.RecordPush, Remote: remote}
	// go-git reads the files: what was published is written first.
	if err := r.Flush(); err != nil {
		return rec, proto.Errorf(proto.EIO, "version.push: %v", err)
	}
	var err error
	// A commit may land between the listing of packs and the ref read
	// (the committer writes packs go-git did not list): once more.
	for try := 0; try < 2; try++ {
		var g *gogit.Repository
		g, err = gogit.PlainOpen(r.Dir())
		if err != nil {
			return rec, proto.Errorf(proto.EIO, "%v", err)
		}
		var head *plumbing.Reference
		head, err = g.Head()
		if err != nil {
			return rec, proto.Errorf(proto.ENOENT, "version.push: nothing committed yet (ox-commit first): %v", err)
		}
		rec.Ref, rec.Commit = head.Name().String(), head.Hash().String()
		spec := gitconfig.RefSpec("+" + rec.Ref + ":" + rec.Ref)
		// An anonymous remote: nothing is written to the repository's
		// config (Repository.Push wants a named one).
		rem := gogit.NewRemote(g.Storer, &gitconfig.RemoteConfig{Name: "push", URLs: []string{remote}})
		err = rem.PushContext(ctx, &gogit.PushOptions{RemoteName: "push", RefSpecs: []gitconfig.RefSpec{spec, "+refs/tags/*:refs/tags/*"}})
		if errors.Is(err, gogit.NoErrAlreadyUpToDate) {
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
