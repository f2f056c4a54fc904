package agenttree

import (
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// A fork shares the committed tree of the agent it copies (a graft: see
// version.Repo.Fork); what it starts with otherwise is planned here. The
// budget used starts again at zero; schedules are copied disabled (a
// fork that woke up on its own clock would act twice for one job), each
// as FORK.JOB (job names are unique across agents).

// ForkPlan is what a fork starts with besides the graft, and what its
// commit changes below the graft.
type ForkPlan struct {
	// Files are the files whose values the fork needs, read by
	// version.Repo.ReadFork in this order.
	Files []version.ForkFile
	// After is what the fork's commit changes below the graft:
	// the budget used reset, the schedules left out (and their disabled
	// copies added, by Changes).
	After []version.PathChange
	name  string
}

// PlanFork plans the fork as name of files (path -> blob): at the state
// now (live), the agent's kernel files (liveKernelFiles); at an older
// commit, all of the agent's files at it.
func PlanFork(files map[string]string, name string, live bool) *ForkPlan {
	p := &ForkPlan{name: name}
	for path, blob := range files {
		space, _, key, ok := version.SplitSpacePath(path)
		if !ok {
			continue
		}
		job := isJob(space, key)
		if job {
			p.After = append(p.After, version.PathChange{Path: version.SpacePath(space, name, key), Action: version.Deleted})
		}
		if live && !job && (space != state.SpaceSys || key != Budget) {
			continue
		}
		p.Files = append(p.Files, version.ForkFile{Space: space, Key: key, Blob: blob})
	}
	return p
}

// Changes are the fork's changes for the values of p.Files (vals, in the
// same order), made at now: each file as it is, but the budget with its
// use reset and each job as its disabled copy (jobs.ForkCopy; left out
// when taken says its name is). They are added to p.After; copies are
// the jobs copied, for the scheduler's table.
func (p *ForkPlan) Changes(vals [][]byte, now time.Time, taken func(job string) bool) (changes []*state.Change, copies []*jobs.File) {
	for i, f := range p.Files {
		val := vals[i]
		if isJob(f.Space, f.Key) {
			j := jobs.ForkCopy(val, p.name, taken)
			if j == nil {
				continue
			}
			ch := j.Change()
			p.After = append(p.After, version.PathChange{Path: version.SpacePath(f.Space, p.name, ch.Key), Action: version.Modified, To: string(ch.Value)})
			changes = append(changes, ch)
			copies = append(copies, j)
			continue
		}
		if f.Space == state.SpaceSys && f.Key == Budget {
			var ok bool
			if val, ok = budget.ForkFile(val, now); ok {
				p.After = append(p.After, version.PathChange{Path: version.SpacePath(f.Space, p.name, f.Key), Action: version.Modified, To: string(val)})
			}
		}
		changes = append(changes, &state.Change{Agent: p.name, Space: f.Space, Key: f.Key, Value: val})
	}
	return changes, copies
}

// isJob reports whether key of space is a job's file.
func isJob(space, key string) bool {
	return space == state.SpaceSys && strings.HasPrefix(key, jobs.Dir+"/")
}
