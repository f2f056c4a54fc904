package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/mountinfo"
)

// Cgroups is where oxiosd makes a control group for each run and each
// exec, so that a run's processes together are bound by its limits: the
// number of processes (pids.max, which binds root, where RLIMIT_NPROC does
// not) and their memory. It is what the machine offers: the unified (v2)
// hierarchy when oxiosd may enable the pids or memory controller there,
// else the v1 pids and memory hierarchies when they are writable, else
// nothing, and the rlimits are all there is.
//
// On v2 a process starts in its group (clone3's CLONE_INTO_CGROUP). On v1
// the starting thread joins the group before the fork, so the child is born
// in it, and leaves it after: no window in which the run could fork outside.
type Cgroups struct {
	v2 string // the unified hierarchy: the parent of the groups, or ""
	// v1: per controller, the parent of the groups and oxiosd's own group
	// (where the starting thread goes back to).
	v1 []v1ctl
	// held counts the runs and execs started (or starting) under c
	// whose processes may still be around, in a group of c or in a
	// sandbox's pid namespace. While it is 0 no process can be in either,
	// and Attribute does not read /proc for every caller.
	held atomic.Int64
}

// hold counts a run or exec that is starting; release(g) counts it gone
// once its group g (nil: none) is removed. A group that could not be
// removed (a process held on past SIGKILL) keeps the count: its
// processes are still to be attributed.
func (c *Cgroups) hold() {
	if c != nil {
		c.held.Add(1)
	}
}

func (c *Cgroups) release(g *Group) {
	if c != nil && (g == nil || !g.stuck) {
		c.held.Add(-1)
	}
}

// quiet reports whether no run or exec of c may have a process left.
func (c *Cgroups) quiet() bool { return c.held.Load() == 0 }

type v1ctl struct {
	name, parent, home string
}

// v1group is a group's dir in one v1 hierarchy.
type v1group struct {
	dir string
	ctl *v1ctl
}

// errJoin: the starting thread could not join the group; nothing was
// started.
var errJoin = errors.New("cannot join cgroup")

// Group is one run's control group.
type Group struct {
	v2   string
	v1   []v1group // on v1, its dir in each hierarchy used
	cg   *Cgroups
	fd   int // v2: the group's dir, for CLONE_INTO_CGROUP; -1 on v1
	pids bool
	// memory: the group bounds memory (the controller is there).
	memory bool
	// limited: a process limit is set (else no fork can be refused).
	limited bool
	// stuck: Remove could not remove the group.
	stuck bool
}

// UseCgroups gives each run of s a control group (OpenCgroups) when the
// machine offers them, and logs which; when it does not, it logs why and
// the runs have the rlimits of [limits] only.
func (s *Supervisor) UseCgroups() {
	cg, err := OpenCgroups()
	if err != nil {
		s.log.Info("no cgroups for runs: the rlimits of [limits] only", "why", err)
		return
	}
	s.log.Info("cgroups for runs", "where", cg.String())
	s.Cgroups = cg
}

// OpenCgroups finds where oxiosd may make groups, and makes the parent
// (named after oxiosd's pid, so that daemons side by side do not meet).
// It returns nil when the machine offers none; why is in the error.
func OpenCgroups() (*Cgroups, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	paths := parseProcCgroup(string(self))
	name := "oxios." + strconv.Itoa(os.Getpid())
	if mnt, ok := mounts[""]; ok {
		if c, err := openV2(filepath.Join(mnt, paths[""]), name); err == nil {
			if err := c.probe(); err == nil {
				return c, nil
			}
			c.Close()
		}
	}
	c := &Cgroups{}
	var errs []error
	for _, ctl := range []string{"pids", "memory"} {
		mnt, ok := mounts[ctl]
		if !ok {
			continue
		}
		home := filepath.Join(mnt, paths[ctl])
		parent := filepath.Join(home, name)
		cleanStale(home)
		if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			errs = append(errs, err)
			continue
		}
		c.v1 = append(c.v1, v1ctl{name: ctl, parent: parent, home: home})
	}
	if len(c.v1) == 0 {
		errs = append(errs, errors.New("no writable cgroup hierarchy with the pids or memory controller"))
		return nil, errors.Join(errs...)
	}
	if err := c.probe(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// probe starts /bin/true in a group, as a run would start: a hierarchy
// that lets oxiosd make groups but not start processes in them (a kernel
// without CLONE_INTO_CGROUP, say) is no use, and must not fail the runs.
func (c *Cgroups) probe() error {
	g, err := c.New("probe", Limits{Processes: 4, Memory: 64 << 20})
	if err != nil {
		return fmt.Errorf("cgroup probe: %w", err)
	}
	defer g.Remove()
	cmd := exec.Command("/bin/true")
	err = g.Start(func(attr *syscall.SysProcAttr) error {
		cmd.SysProcAttr = attr
		return cmd.Start()
	}, &syscall.SysProcAttr{}, Limits{Processes: 4})
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return fmt.Errorf("cgroup probe: starting a process in a group: %w", err)
	}
	return nil
}

// openV2 enables the pids and memory controllers below dir. A cgroup with
// controllers for its children may hold no process itself, so oxiosd moves
// into a leaf of its own first (what systemd's Delegate=yes allows).
func openV2(dir, name string) (*Cgroups, error) {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	var enable []string
	for _, f := range strings.Fields(string(have)) {
		if f == "pids" || f == "memory" {
			enable = append(enable, "+"+f)
		}
	}
	if len(enable) == 0 {
		return nil, fmt.Errorf("%s: no pids or memory controller", dir)
	}
	ctl := filepath.Join(dir, "cgroup.subtree_control")
	if err := os.WriteFile(ctl, []byte(strings.Join(enable, " ")), 0); err != nil {
		// Busy with processes of its own: move oxiosd into a leaf.
		leaf := filepath.Join(dir, "oxiosd")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return nil, err
		}
		if err := os.WriteFile(ctl, []byte(strings.Join(enable, " ")), 0); err != nil {
			return nil, err
		}
	}
	cleanStale(dir)
	parent := filepath.Join(dir, name)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0); err != nil {
		os.Remove(parent)
		return nil, err
	}
	return &Cgroups{v2: parent}, nil
}

// String says which hierarchy is used, for the log.
func (c *Cgroups) String() string {
	if c == nil {
		return "none"
	}
	if c.v2 != "" {
		return "v2 " + c.v2
	}
	var s []string
	for _, v := range c.v1 {
		s = append(s, "v1 "+v.parent)
	}
	return strings.Join(s, ", ")
}

// Close removes the parent (its groups are gone with their runs).
func (c *Cgroups) Close() {
	if c == nil {
		return
	}
	if c.v2 != "" {
		removeTree(c.v2)
	}
	for _, v := range c.v1 {
		removeTree(v.parent)
	}
}

// New makes the group id with limits l (0: no limit).
func (c *Cgroups) New(id string, l Limits) (*Group, error) {
	g := &Group{cg: c, fd: -1, limited: l.Processes > 0}
	if c.v2 != "" {
		g.v2 = filepath.Join(c.v2, id)
		if err := os.Mkdir(g.v2, 0o755); err != nil {
			return nil, err
		}
		if err := g.limitV2(l); err != nil {
			os.Remove(g.v2)
			return nil, err
		}
		fd, err := unix.Open(g.v2, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			os.Remove(g.v2)
			return nil, err
		}
		g.fd = fd
		return g, nil
	}
	for i := range c.v1 {
		v := &c.v1[i]
		// Without a memory limit there is nothing for a memory group to
		// do (the pids group holds the run together): spare its cost.
		if v.name == "memory" && l.Memory == 0 {
			continue
		}
		dir := filepath.Join(v.parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.Remove()
			return nil, err
		}
		g.v1 = append(g.v1, v1group{dir, v})
		var err error
		switch v.name {
		case "pids":
			g.pids = true
			if l.Processes > 0 {
				// One more while the starting thread is in it.
				err = writeInt(filepath.Join(dir, "pids.max"), l.Processes+1)
			}
		case "memory":
			g.memory = true
			err = writeInt(filepath.Join(dir, "memory.limit_in_bytes"), l.Memory)
			// No swap to run on past the limit, where swap is accounted
			// at all.
			writeInt(filepath.Join(dir, "memory.memsw.limit_in_bytes"), l.Memory)
		}
		if err != nil {
			g.Remove()
			return nil, err
		}
	}
	return g, nil
}

func (g *Group) limitV2(l Limits) error {
	if l.Processes > 0 {
		err := writeInt(filepath.Join(g.v2, "pids.max"), l.Processes)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		g.pids = err == nil
	}
	_, err := os.Stat(filepath.Join(g.v2, "memory.max"))
	g.memory = err == nil
	if l.Memory > 0 && g.memory {
		if err := writeInt(filepath.Join(g.v2, "memory.max"), l.Memory); err != nil {
			return err
		}
		// No swap to run on past the limit.
		writeInt(filepath.Join(g.v2, "memory.swap.max"), 0)
	}
	return nil
}

// Start starts cmd inside the group: cmd.Start with the group set up
// around it. limits are the group's (for pids.max on v1, set once the
// starting thread is out).
func (g *Group) Start(start func(attr *syscall.SysProcAttr) error, attr *syscall.SysProcAttr, l Limits) error {
	if g == nil {
		return start(attr)
	}
	if g.fd >= 0 {
		attr.UseCgroupFD = true
		attr.CgroupFD = g.fd
		return start(attr)
	}
	// v1: this thread joins the group, forks (the child is born in the
	// group) and goes back home. A locked thread does not give birth to
	// the runtime's new threads (they come from its template thread).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := []byte(strconv.Itoa(unix.Gettid()))
	var joined []v1group
	defer func() {
		for _, j := range joined {
			os.WriteFile(filepath.Join(j.ctl.home, "tasks"), tid, 0)
		}
	}()
	for _, j := range g.v1 {
		if err := os.WriteFile(filepath.Join(j.dir, "tasks"), tid, 0); err != nil {
			return fmt.Errorf("%w %s: %w", errJoin, j.dir, err)
		}
		joined = append(joined, j)
	}
	err := start(attr)
	for _, j := range joined {
		os.WriteFile(filepath.Join(j.ctl.home, "tasks"), tid, 0)
	}
	joined = nil
	if g.pids && l.Processes > 0 {
		for _, j := range g.v1 {
			if j.ctl.name == "pids" {
				writeInt(filepath.Join(j.dir, "pids.max"), l.Processes)
			}
		}
	}
	return err
}

// rlimits returns the rlimits to set beside the group: where the group
// bounds memory, the address space is left alone (it is a poor proxy for
// memory: a Go program or a JIT reserves far more than it uses).
func (g *Group) rlimits(l Limits) Limits {
	if g == nil {
		return l
	}
	if g.memory {
		l.Memory = 0
	}
	// The group bounds the run's processes, refusals counted (and
	// audited); RLIMIT_NPROC, which binds a sandbox's own uid, would refuse
	// first and uncounted.
	if g.pids {
		l.Processes = 0
	}
	return l
}

// Procs returns the pids in the group (not oxiosd's own).
func (g *Group) Procs() []int {
	if g == nil {
		return nil
	}
	dir := g.v2
	if dir == "" && len(g.v1) > 0 {
		dir = g.v1[0].dir
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != self && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Kill sends sig to every process in the group.
func (g *Group) Kill(sig syscall.Signal) {
	for _, pid := range g.Procs() {
		syscall.Kill(pid, sig)
	}
}

// Remove kills what is left in the group and removes it.
func (g *Group) Remove() {
	if g == nil {
		return
	}
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
	for try := 0; try < 50 && len(g.Procs()) > 0; try++ {
		g.Kill(syscall.SIGKILL)
		unix.Nanosleep(&unix.Timespec{Nsec: 2e6}, nil)
	}
	rm := func(dir string) {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			g.stuck = true
		}
	}
	if g.v2 != "" {
		rm(g.v2)
	}
	for _, j := range g.v1 {
		rm(j.dir)
	}
}

// Hits counts how often the group ran into its limits: forks refused at
// pids.max, and times its memory reached the limit (reclaim or OOM kill).
type Hits struct {
	Forks, Memory, OOMKills uint64
}

// Hits reads the group's limit events. Call it before Remove.
func (g *Group) Hits() Hits {
	var h Hits
	if g == nil {
		return h
	}
	if g.v2 != "" {
		h.Forks = eventCount(filepath.Join(g.v2, "pids.events"), "max")
		h.Memory = eventCount(filepath.Join(g.v2, "memory.events"), "max")
		h.OOMKills = eventCount(filepath.Join(g.v2, "memory.events"), "oom_kill")
		return h
	}
	for _, j := range g.v1 {
		switch {
		case j.ctl.name == "pids" && g.limited:
			h.Forks = eventCount(filepath.Join(j.dir, "pids.events"), "max")
		case j.ctl.name == "memory":
			h.Memory = readInt(filepath.Join(j.dir, "memory.failcnt"))
			h.OOMKills = eventCount(filepath.Join(j.dir, "memory.oom_control"), "oom_kill")
		}
	}
	return h
}

// String says what was hit, or "" for nothing.
func (h Hits) String() string {
	var s []string
	if h.Forks > 0 {
		s = append(s, fmt.Sprintf("%d forks refused at the process limit", h.Forks))
	}
	if h.OOMKills > 0 {
		s = append(s, fmt.Sprintf("%d processes killed at the memory limit", h.OOMKills))
	} else if h.Memory > 0 {
		s = append(s, fmt.Sprintf("memory limit reached %d times", h.Memory))
	}
	return strings.Join(s, ", ")
}

// eventCount reads the count of key in a flat keyed file ("max 3").
func eventCount(name, key string) uint64 {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func writeInt(name string, v uint64) error {
	return os.WriteFile(name, []byte(strconv.FormatUint(v, 10)), 0)
}

func readInt(name string) uint64 {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// parseProcCgroup maps each v1 controller ("pids", "memory") and the
// unified hierarchy ("") to the process's path in it.
func parseProcCgroup(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			m[""] = f[2]
			continue
		}
		for _, ctl := range strings.Split(f[1], ",") {
			m[ctl] = f[2]
		}
	}
	return m
}

// cgroupMounts maps each mounted v1 controller, and "" for the unified
// hierarchy, to its mount point.
func cgroupMounts() (map[string]string, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, mt := range ms {
		switch mt.FSType {
		case "cgroup2":
			if _, seen := m[""]; !seen {
				m[""] = mt.Point
			}
		case "cgroup":
			for _, o := range strings.Split(mt.Super, ",") {
				if _, seen := m[o]; !seen && (o == "pids" || o == "memory") {
					m[o] = mt.Point
				}
			}
		}
	}
	return m, nil
}

// cleanStale removes the parents left by oxiosd processes that are gone
// (a crash): empty groups only, a live process keeps its group.
func cleanStale(home string) {
	ents, err := os.ReadDir(home)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, ok := strings.CutPrefix(e.Name(), "oxios.")
		if !e.IsDir() || !ok {
			continue
		}
		n, err := strconv.Atoi(pid)
		if err != nil || n == os.Getpid() || syscall.Kill(n, 0) == nil {
			continue
		}
		removeTree(filepath.Join(home, e.Name()))
	}
}

// removeTree removes a cgroup dir and the groups below it (cgroup dirs
// are removed with rmdir, children first).
func removeTree(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir)
}

// pgidOf returns the process group of pid, or 0.
func pgidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid pgrp ...: comm may hold anything but ')'
	// ends it last.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0
	}
	n, _ := strconv.Atoi(f[2])
	return n
}
