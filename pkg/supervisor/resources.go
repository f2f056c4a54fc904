package supervisor

import (
	"os"
	"strconv"

	"github.com/oxios/oxios/pkg/proto"
)

// Usage is what a run's processes use at one moment: the sums over the
// members of its process group and their descendants (a child that left
// the group with setsid(2) still counts).
type Usage struct {
	CPU   float64 // seconds, user+system, with the children they reaped
	RSS   int64   // bytes
	FDs   int     // open file descriptors
	Procs int
}

// Records returns the record of each of runs, with the usage of those
// still running sampled now (Sample).
func (s *Supervisor) Records(runs []*Run) []proto.RunRecord {
	use := s.Sample(runs)
	out := make([]proto.RunRecord, 0, len(runs))
	for _, r := range runs {
		rec := r.Record()
		if u, ok := use[rec.ID]; ok {
			rec.CPU, rec.RSS, rec.FDs, rec.Procs = u.CPU, u.RSS, u.FDs, u.Procs
		}
		out = append(out, rec)
	}
	return out
}

// Sample reads /proc once and returns the usage of each run of runs that
// is still running, by id. It costs a read of every process's stat file
// and fd folder, so it is done only when someone asks (ox-ps, ox-top).
func (s *Supervisor) Sample(runs []*Run) map[string]Usage {
	leaders := map[int]string{}
	for _, r := range runs {
		select {
		case <-r.done:
			continue
		default:
		}
		r.mu.Lock()
		pid, id := r.rec.PID, r.rec.ID
		r.mu.Unlock()
		if pid > 0 {
			leaders[pid] = id
		}
	}
	out := make(map[string]Usage, len(leaders))
	if len(leaders) == 0 {
		return out
	}
	d, err := os.Open("/proc")
	if err != nil {
		return out
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	procs := make(map[int]stat, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			procs[pid] = st
		}
	}
	// owner finds the run a process belongs to: its group's, or that of
	// the nearest ancestor that belongs to one.
	owner := map[int]string{}
	var find func(pid, depth int) string
	find = func(pid, depth int) string {
		if id, ok := owner[pid]; ok {
			return id
		}
		st, ok := procs[pid]
		id := ""
		switch {
		case !ok || pid <= 1 || depth > 64:
		case leaders[st.pgid] != "":
			id = leaders[st.pgid]
		case leaders[pid] != "":
			id = leaders[pid]
		default:
			id = find(st.ppid, depth+1)
		}
		owner[pid] = id
		return id
	}
	for pid, st := range procs {
		id := find(pid, 0)
		if id == "" {
			continue
		}
		u := out[id]
		u.CPU += st.cpu
		u.RSS += st.rss
		u.FDs += countFDs(pid)
		u.Procs++
		out[id] = u
	}
	return out
}

func countFDs(pid int) int {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(256)
		n += len(names)
		if err != nil || len(names) == 0 {
			return n
		}
	}
}
