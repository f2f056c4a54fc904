package integration

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// The red team of issue 42, the sandbox's second round: from inside runs
// of agents with the default policy, the kernel's other entries (i386's
// int $0x80 and sysenter, x32's numbers), the kernel's shared objects
// (keyrings, io_uring, userfaultfd, perf, bpf, SysV IPC, abstract Unix
// sockets), the disk and the inodes, another run's workspace, /dev, and
// what a run's mountinfo says of the host. Each is tried against a daemon
// run as root and against one run as an ordinary user (rootless).

const nobodyUID = 65534

func redTeamKernel(t *testing.T) { redTeamKernelAs(t, 0) }

// redTeamRootless is the same attacks against an oxiosd started by an
// ordinary user (nobody), whose runs are made in user namespaces, plus
// what such a daemon's runs could try on each other and on its data.
func redTeamRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start oxiosd as another (ordinary) user")
	}
	redTeamKernelAs(t, nobodyUID)
}

// rtRun is a run's end as ox-spawn printed it.
type rtRun struct {
	id, out, signal string
	status          int
}

// spawnArgv runs argv as a process run of agent and returns how it ended.
func spawnArgv(t *testing.T, d *daemon, agent string, argv ...string) rtRun {
	t.Helper()
	return spawnEnv(t, d, agent, nil, argv...)
}

// spawnEnv is spawnArgv with the variables env (NAME=VALUE) set.
func spawnEnv(t *testing.T, d *daemon, agent string, env []string, argv ...string) rtRun {
	t.Helper()
	args := []string{"-a", agent, "-n"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	return runEnd(t, d.ox("", "ox-spawn", append(append(args, "--"), argv...)...), fmt.Sprintf("ox-spawn %q", argv))
}

// runEnd is how a run ended, from ox-spawn's records in r (what: the
// command, for the failure).
func runEnd(t *testing.T, r result, what string) rtRun {
	t.Helper()
	var x rtRun
	var lines []string
	for _, rec := range records(t, r.stdout) {
		switch rec["type"] {
		case "run":
			if x.id == "" {
				x.id, _ = rec["id"].(string)
			}
		case "output":
			lines = append(lines, rec["text"].(string))
		case "exit":
			f, _ := rec["status"].(float64)
			x.status = int(f)
			x.signal, _ = rec["signal"].(string)
		}
	}
	if x.id == "" {
		t.Fatalf("%s: no run record: %d %s %s", what, r.code, r.stdout, r.stderr)
	}
	x.out = strings.Join(lines, "\n")
	return x
}

func redTeamKernelAs(t *testing.T, uid uint32) {
	mode := "root"
	if uid != 0 {
		mode = "rootless"
	}
	d := startDaemon(t, daemonOpts{uid: uid})
	c := d.client(t)
	name := func(s string) string { return "[" + mode + "] " + s }

	// The daemon starts runs at all (the rootless daemon could not),
	// unless the kernel refuses an ordinary user namespaces: then the
	// refusal says so, naming the switch.
	if uid != 0 {
		if r := d.ox("", "ox-spawn", "-a", "ops", "-n", "--", "true"); r.code != 0 {
			if strings.Contains(r.stderr, "user namespace") {
				t.Skipf("this kernel refuses unprivileged user namespaces: %s", r.stderr)
			}
			t.Fatalf("a rootless daemon's first run: exit %d %s", r.code, r.stderr)
		}
	}
	first := spawnArgv(t, d, "ops", "id", "-u")
	confined(t, name("a run starts, as a sandbox uid of its own (ox-spawn -a ops -- id -u)"), func() bool {
		t.Logf("id -u: %+v", first)
		return first.status == 0 && strings.HasPrefix(first.out, "19")
	})

	// The i386 entry: first what this kernel does with it, outside any
	// sandbox (a PVM guest's kernel has none: the call faults).
	host, _ := exec.Command(bin("oxios-rtprobe"), "int80", "getpid").CombinedOutput()
	has32 := strings.HasPrefix(string(host), "getpid ok")
	t.Logf("the host's i386 entry: %q (has32=%v)", firstLine(string(host)), has32)
	for _, call := range []string{"unshare", "keyctl", "add_key", "ptrace", "chroot", "bpf", "kcmp", "getpid"} {
		what := name("i386 " + call + " through int $0x80 from a run")
		if !has32 {
			impossible(t, what+" (this kernel has no 32-bit entry)", func() bool {
				r := spawnArgv(t, d, "ops", "oxios-rtprobe", "int80", call)
				// The Go runtime of the probe catches the fault and exits 2.
				return (r.signal != "" || r.status != 0) && !strings.Contains(r.out, call+" ok")
			})
			continue
		}
		attempt(t, what, func() (bool, bool) {
			since := auditSeq(t, c)
			r := spawnArgv(t, d, "ops", "oxios-rtprobe", "int80", call)
			t.Logf("%s: %+v", call, r)
			return r.signal == "SYS" && !strings.Contains(r.out, call+" ok"),
				auditedSince(t, c, since, proto.OpRunExit, "ok", "ops:"+r.id+" signal SYS")
		})
	}
	// x32's numbers go through the 64-bit entry: every kernel sees them,
	// and the filter kills the caller.
	for _, call := range []string{"unshare", "keyctl", "mkdir"} {
		attempt(t, name("x32 "+call+" (a 64-bit call with bit 30 set) from a run"), func() (bool, bool) {
			since := auditSeq(t, c)
			r := spawnArgv(t, d, "ops", "oxios-rtprobe", "x32", call, "/work/x32-made")
			t.Logf("x32 %s: %+v", call, r)
			return r.signal == "SYS" && !strings.Contains(r.out, " ok"),
				auditedSince(t, c, since, proto.OpRunExit, "ok", "ops:"+r.id+" signal SYS")
		})
	}
	impossible(t, name("i386 mkdir through sysenter from a run"), func() bool {
		r := spawnArgv(t, d, "ops", "/bin/sh", "-c", "oxios-rtprobe sysenter mkdir /work/se-made; ls -d /work/se-made && echo MADE")
		t.Logf("sysenter: %+v", r)
		return !strings.Contains(r.out, "MADE")
	})

	// The kernel's shared objects, through the native entry.
	script := probes + `
for c in add_key keyctl io_uring userfaultfd perf_event_open bpf unshare; do probe $c oxios-rtprobe native $c; done
probe mknod mknod /work/mem c 1 1
probe devs sh -c 'ls /dev | tr "\n" " "'
probe mountinfo cat /proc/self/mountinfo
`
	r := spawnArgv(t, d, "ops", "/bin/sh", "-c", script)
	t.Logf("kernel objects:\n%s", r.out)
	for _, c := range []string{"add_key", "keyctl", "io_uring", "userfaultfd", "perf_event_open", "bpf", "unshare"} {
		impossible(t, name(c+" from a run (the kernel's shared objects)"), func() bool {
			l := probeLine(r.out, c)
			return strings.Contains(l, "errno 1 ") && !strings.Contains(l, c+" ok")
		})
	}
	impossible(t, name("mknod a device in the workspace"), func() bool {
		return strings.Contains(probeLine(r.out, "mknod"), "Operation not permitted")
	})
	confined(t, name("/dev of a run holds only the harmless devices"), func() bool {
		l := strings.TrimSpace(strings.TrimPrefix(probeLine(r.out, "devs"), "devs rc=0"))
		for _, dev := range strings.Fields(l) {
			switch dev {
			case "null", "zero", "full", "random", "urandom", "tty", "fd", "stdin", "stdout", "stderr", "shm":
			default:
				t.Logf("/dev has %q", dev)
				return false
			}
		}
		return l != ""
	})
	confined(t, name("a run's mountinfo names no folder of the data directory"), func() bool {
		mi := r.out[strings.Index(r.out, "mountinfo rc="):]
		t.Logf("mountinfo: %s", mi)
		return strings.Contains(mi, " / /work ") && !strings.Contains(mi, d.data) && !strings.Contains(mi, "/sockets/")
	})

	// Code the run wrote, run from an anonymous file (memfd_create, then
	// exec of /proc/self/fd/N): allowed by design (a run builds and runs
	// programs in /work anyway), and it runs inside the same walls.
	confined(t, name("a program run from a memfd keeps the run's uid, no capabilities and the filter"), func() bool {
		r := spawnArgv(t, d, "ops", "oxios-rtprobe", "memfd-exec", "/bin/grep", "grep", "-E", "^(Uid|CapEff|Seccomp):", "/proc/self/status")
		t.Logf("memfd: %+v", r)
		return r.status == 0 && strings.Contains(r.out, "CapEff:\t0000000000000000") && strings.Contains(r.out, "Seccomp:\t2") && strings.Contains(r.out, "\t19")
	})

	// A key another run of another agent would find: none can be made,
	// and /proc/keys of a run shows none of another's.
	impossible(t, name("a run of web reads a key that a run of ops added to a keyring"), func() bool {
		spawnArgv(t, d, "ops", "oxios-rtprobe", "native", "add_key")
		r := spawnArgv(t, d, "web", "/bin/sh", "-c", "cat /proc/keys 2>&1; echo done")
		return !strings.Contains(r.out, "oxios-rt") && strings.Contains(r.out, "done")
	})

	// SysV IPC: a segment made in one run is not seen from another, nor
	// on the host.
	impossible(t, name("a SysV shared memory segment of a run of ops seen by a run of web"), func() bool {
		hold := d.ox("", "ox-spawn", "-a", "ops", "-d", "--", "/bin/sh", "-c", "ipcmk -M 4096 -p 0666 && echo segments=$(ipcs -m | grep -c 0x); sleep 2")
		holdID, _ := records(t, hold.stdout)[0]["id"].(string)
		time.Sleep(300 * time.Millisecond)
		r := spawnArgv(t, d, "web", "ipcs", "-m")
		made := d.ox("", "ox-attach", holdID).stdout
		t.Logf("web's ipcs: %q; ops's: %q", r.out, made)
		// ops made one and saw it; web saw none.
		return strings.Contains(made, "segments=1") && r.status == 0 && !strings.Contains(r.out, "0x")
	})

	// Another run of the same agent: its workspace is its own.
	impossible(t, name("a second run of ops reaches the first run's workspace"), func() bool {
		first := d.ox("", "ox-spawn", "-a", "ops", "-d", "--", "/bin/sh", "-c", "echo mine > /work/first-run-file; sleep 20")
		firstID, _ := records(t, first.stdout)[0]["id"].(string)
		defer d.ox("", "ox-kill", "-s", "KILL", firstID)
		time.Sleep(300 * time.Millisecond)
		r := spawnArgv(t, d, "ops", "/bin/sh", "-c", "ls -a /work; cat /work/first-run-file; ls /proc/*/root/work 2>&1 | head -3")
		t.Logf("second run: %q", r.out)
		return !strings.Contains(r.out, "mine") && strings.Contains(r.out, "No such file")
	})

	// Execs outside a run, four at once of one agent: each has its own
	// workspace (they shared one, and failed re-owning it mid-way).
	confined(t, name("four execs of ops at once, each in a workspace of its own"), func() bool {
		var wg sync.WaitGroup
		results := make([]result, 4)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = d.ox("", "ox-exec", "-a", "ops", "--", "ls", "-a", "/work")
			}()
		}
		wg.Wait()
		for _, r := range results {
			if r.code != 0 || strings.Contains(r.stdout, "Permission denied") {
				t.Logf("exec: %+v", r)
				return false
			}
		}
		return true
	})

	// The abstract socket namespace is the host's when the network is
	// granted: Landlock's scope (ABI 6) keeps runs apart in it.
	netPol := sectionPolicy(t, map[string]string{"sandbox": "isolation = \"full\"\nnetwork = true"})
	if uid != 0 {
		os.Chmod(filepath.Dir(netPol), 0o755)
		os.Chmod(netPol, 0o644)
	}
	for _, a := range []string{"alice", "bob"} {
		d.mustOx(t, "", "ox-policy", "set", "-a", a, netPol)
	}
	sock := fmt.Sprintf("oxios-rt-%s-%d", mode, os.Getpid())
	lst := d.ox("", "ox-spawn", "-a", "alice", "-d", "--", "oxios-rtprobe", "abstract-listen", sock)
	lstID, _ := records(t, lst.stdout)[0]["id"].(string)
	defer d.ox("", "ox-kill", "-s", "KILL", lstID)
	var hostGot string
	for i := 0; i < 50 && hostGot == ""; i++ {
		if cn, err := net.Dial("unix", "@"+sock); err == nil {
			hostGot, _ = bufio.NewReader(cn).ReadString('\n')
			cn.Close()
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if hostGot == "" {
		t.Errorf("the host could not reach alice's abstract socket @%s: the attack below proves nothing", sock)
	} else if landlockABI(t, d) >= 6 {
		impossible(t, name("a run of bob connects to an abstract Unix socket a run of alice listens on (both with network = true)"), func() bool {
			r := spawnArgv(t, d, "bob", "oxios-rtprobe", "abstract-connect", sock)
			t.Logf("bob: %+v", r)
			return strings.Contains(r.out, "connect failed") && strings.Contains(r.out, "operation not permitted")
		})
	} else {
		t.Logf("Landlock below ABI 6: abstract sockets are not scoped on this kernel")
	}

	// The disk and the inodes: a run that fills its workspace or its
	// scratch folders gets ENOSPC, and another agent's save goes on.
	fill := limitsPolicy(t, "memory = \"512MiB\"\ncpu = \"0\"\nprocesses = 512\nopen_files = 1024\ndisk = \"8MiB\"\ntmp = \"4MiB\"")
	if uid != 0 {
		os.Chmod(filepath.Dir(fill), 0o755)
		os.Chmod(fill, 0o644)
	}
	d.mustOx(t, "", "ox-policy", "set", "-a", "filler", fill)
	confined(t, name("a run fills /tmp (limits.tmp = 4MiB): its own ENOSPC"), func() bool {
		r := spawnArgv(t, d, "filler", "/bin/sh", "-c", "head -c 20000000 /dev/zero > /tmp/big; echo rc=$?; head -c 20000000 /dev/zero > /dev/shm/big; echo rc=$?")
		t.Logf("tmp: %q", r.out)
		return strings.Count(r.out, "No space left on device") == 2
	})
	confined(t, name("a run fills its workspace (limits.disk = 8MiB): its own ENOSPC, and another agent's save succeeds meanwhile"), func() bool {
		hold := d.ox("", "ox-spawn", "-a", "filler", "-d", "--", "/bin/sh", "-c", "head -c 20000000 /dev/zero > /work/big; echo rc=$?; sleep 3")
		holdID, _ := records(t, hold.stdout)[0]["id"].(string)
		var size int64
		if uid == 0 {
			// As root, the workspace's filesystem is mounted on the host
			// too: once it is full, another agent saves.
			for i := 0; i < 50 && size < 8<<20; i++ {
				time.Sleep(100 * time.Millisecond)
				if fi, err := os.Stat(filepath.Join(d.data, "work", "filler", holdID, "big")); err == nil {
					size = fi.Size()
				}
			}
		} else {
			// Rootless, it is a filesystem of the run's namespace alone,
			// full well within the second.
			time.Sleep(time.Second)
		}
		save := d.ox("", "ox-state", "save", "-a", "other", "k", "v")
		out := d.ox("", "ox-attach", holdID).stdout
		t.Logf("workspace: %d bytes, %q; other's save: %+v", size, out, save)
		return strings.Contains(out, "No space left on device") && save.code == 0
	})
	confined(t, name("a run fills its workspace's inodes with empty files: ENOSPC at 2048"), func() bool {
		r := spawnArgv(t, d, "filler", "/bin/sh", "-c", `i=0; while true 2>/dev/null > /work/f$i; do i=$((i+1)); done; echo files=$i`)
		t.Logf("inodes: %q", r.out)
		var n int
		fmt.Sscanf(r.out[strings.Index(r.out, "files=")+6:], "%d", &n)
		return n > 0 && n <= 2048
	})
	confined(t, name("a run's execs work in the run's own workspace, bounded with it"), func() bool {
		r := spawnArgv(t, d, "filler", "/bin/sh", "-c", `head -c 7000000 /dev/zero > /work/big; echo mine > /work/f
ox-exec -- cat /work/f; echo "cat rc=$?"
ox-exec -- ls /work; head -c 2000000 /dev/zero > /work/more; echo "more rc=$?"`)
		t.Logf("exec: %q", r.out)
		return strings.Contains(r.out, "mine\ncat rc=0") && strings.Contains(r.out, "big\nf\n") && strings.Contains(r.out, "No space left on device") && !strings.Contains(r.out, "more rc=0")
	})

	if uid != 0 {
		// What runs of a rootless daemon could try on each other and on
		// its data: every run is the daemon's user outside.
		webRun := d.ox("", "ox-spawn", "-a", "web", "-d", "--", "/bin/sleep", "30")
		web := records(t, webRun.stdout)[0]
		webID, _ := web["id"].(string)
		webPID := int(web["pid"].(float64))
		defer d.ox("", "ox-kill", "-s", "KILL", webID)
		d.ox("", "ox-state", "save", "-a", "web", "secret", "s3cret")
		script := probes + fmt.Sprintf(`
probe data ls %[1]s
probe secret cat %[1]s/repo/agents/web/state/secret
probe kill kill -STOP %[2]d
probe daemon kill -0 %[3]d
probe proc ls /proc/%[3]d/root/
`, d.data, webPID, d.cmd.Process.Pid)
		r := spawnArgv(t, d, "ops", "/bin/sh", "-c", script)
		t.Logf("rootless probes:\n%s", r.out)
		for _, p := range []struct{ probe, what, want string }{
			{"data", "read the rootless daemon's data dir from a run", "No such file"},
			{"secret", "read another agent's state in DATA from a run", "No such file"},
			{"kill", "stop another agent's run (the same user outside)", "No such process"},
			{"daemon", "signal the daemon (the same user outside)", "No such process"},
			{"proc", "reach the daemon's root through /proc", "No such file"},
		} {
			impossible(t, name(p.what), func() bool {
				l := probeLine(r.out, p.probe)
				return l != "" && !strings.HasPrefix(l, p.probe+" rc=0 ") && strings.Contains(l, p.want)
			})
		}
		attempt(t, name("a run of ops saves into web's state over its socket"), func() (bool, bool) {
			since := auditSeq(t, c)
			r := spawnArgv(t, d, "ops", "/bin/sh", "-c", `ox-state save -a web secret pwned; echo "rc=$?"`)
			return strings.Contains(r.out, "rc=77"), auditedBy(t, c, since, proto.OpStateSave, proto.EPERM, "ops", r.id, "web")
		})
		if v := d.ox("", "ox-state", "load", "-a", "web", "secret"); v.stdout != "s3cret" {
			t.Errorf("web's secret after the attacks: %+v", v)
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// landlockABI is the Landlock ABI the daemon found (ox-status's
// sandbox check: "... landlock/N").
func landlockABI(t *testing.T, d *daemon) int {
	t.Helper()
	r := d.ox("", "ox-status", "--json")
	for _, rec := range records(t, r.stdout) {
		if rec["check"] != "sandbox" {
			continue
		}
		text, _ := rec["text"].(string)
		var n int
		if i := strings.Index(text, "landlock/"); i >= 0 {
			fmt.Sscanf(text[i+len("landlock/"):], "%d", &n)
		}
		return n
	}
	t.Logf("ox-status says nothing of the sandbox: %s", r.stdout)
	return 0
}
