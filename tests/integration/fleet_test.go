package integration

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/fleet"
	"github.com/oxios/oxios/share"
)

// natsCluster is three nats-server processes clustered on loopback, with
// JetStream.
type natsCluster struct {
	t     *testing.T
	urls  []string
	procs []*exec.Cmd
	logs  []*syncBuffer
	// seeds and pubs are the nkeys of the NATS users the servers let in
	// (by name: the nodes a, b, c, and "intruder", a client with
	// credentials that is no node): seed files and public keys.
	seeds, pubs map[string]string
}

// fleetUsers are the NATS users of startNATS.
var fleetUsers = []string{"a", "b", "c", "intruder"}

func startNATS(t *testing.T) *natsCluster {
	t.Helper()
	if _, err := exec.LookPath("nats-server"); err != nil {
		t.Skip("nats-server is not installed (apt-get install nats-server): the fleet tests need a real NATS cluster")
	}
	c := &natsCluster{t: t}
	var client, route [3]int
	for i := range 3 {
		client[i], route[i] = freePort(t), freePort(t)
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", client[i]))
	}
	dir := t.TempDir()
	c.seeds, c.pubs = map[string]string{}, map[string]string{}
	var users []string
	for _, u := range fleetUsers {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		f := filepath.Join(dir, u+".nk")
		if err := os.WriteFile(f, append(seed, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		c.seeds[u], c.pubs[u] = f, pub
		if u == "intruder" {
			// Worst case: a user the servers limit in nothing.
			users = append(users, fmt.Sprintf("{nkey: %q}", pub))
		} else {
			// The permissions contrib/fleet's servers give each node.
			users = append(users, fmt.Sprintf("{nkey: %q, %s}", pub, fleet.Permissions(u)))
		}
	}
	for i := range 3 {
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, fmt.Sprintf("\"nats://127.0.0.1:%d\"", route[j]))
			}
		}
		conf := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
jetstream { store_dir: %q }
cluster { name: oxios, listen: 127.0.0.1:%d, routes: [%s] }
authorization { users: [%s] }
`, i, client[i], filepath.Join(dir, fmt.Sprint("js", i)), route[i], strings.Join(routes, ", "), strings.Join(users, ", "))
		cf := filepath.Join(dir, fmt.Sprintf("n%d.conf", i))
		if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("nats-server", "-c", cf)
		buf := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = buf, buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c.procs, c.logs = append(c.procs, cmd), append(c.logs, buf)
	}
	t.Cleanup(func() {
		for i, p := range c.procs {
			if p.ProcessState == nil {
				p.Process.Kill()
				p.Wait()
			}
			if t.Failed() {
				t.Logf("nats-server n%d:\n%s", i, c.logs[i].String())
			}
		}
	})
	for i := range 3 {
		fleetWait(t, 15*time.Second, "nats-server n"+fmt.Sprint(i)+" to listen", func() bool {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", client[i]))
			if err == nil {
				conn.Close()
			}
			return err == nil
		})
	}
	return c
}

// kill9 kills server i without warning.
func (c *natsCluster) kill9(i int) {
	c.procs[i].Process.Signal(syscall.SIGKILL)
	c.procs[i].Wait()
}

func fleetWait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fleetConfig is node's [fleet]: its NATS user's nkey, which signs its
// calls and heads, the other nodes as peers, and admins, the peers whose
// admin is its admin too.
func fleetConfig(nc *natsCluster, node string, admins []string, servers ...string) string {
	var peers []string
	for _, p := range []string{"a", "b", "c"} {
		if p != node {
			peers = append(peers, fmt.Sprintf("%s = %q", p, nc.pubs[p]))
		}
	}
	ad, _ := json.Marshal(admins)
	sv, _ := json.Marshal(servers)
	return fmt.Sprintf("[fleet]\nservers = %s\nnode = %q\nheartbeat = \"500ms\"\nreplicas = 3\nnkey = %q\nadmins = %s\n\n[fleet.peers]\n%s\n",
		sv, node, nc.seeds[node], ad, strings.Join(peers, "\n"))
}

// fleetNodes is what ox-status on d says of the nodes: name -> ok.
func fleetNodes(d *daemon) map[string]bool {
	r := d.ox("", "ox-status", "--json")
	nodes := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var rec struct {
			Check string `json:"check"`
			OK    bool   `json:"ok"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && strings.HasPrefix(rec.Check, "node:") {
			nodes[strings.TrimPrefix(rec.Check, "node:")] = rec.OK
		}
	}
	return nodes
}

// records decodes JSON lines.
func fleetRecords(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		recs = append(recs, m)
	}
	return recs
}

// TestFleet runs three oxiosd nodes on a three-server NATS cluster: one
// cluster for every check, which go in the order that kills a server.
func TestFleet(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	names := []string{"a", "b", "c"}
	ds := map[string]*daemon{}
	cfgs := map[string]string{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, n := range names {
		// Each node names one server: it learns the others from the
		// cluster, and finds them when its own is killed.
		// Each trusts the others' admins, but c trusts only a's: b's
		// admin calls c as a user granted nothing.
		admins := []string{"a", "b", "c"}
		if n == "c" {
			admins = []string{"a"}
		}
		cfg := fleetConfig(nc, n, admins, nc.urls[i])
		cfgs[n] = cfg
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := startDaemon(t, daemonOpts{config: cfg})
			mu.Lock()
			ds[n] = d
			mu.Unlock()
		}()
	}
	wg.Wait()
	a, b, c := ds["a"], ds["b"], ds["c"]

	t.Run("status", func(t *testing.T) {
		// A new three-server JetStream cluster places its replicated
		// streams in a second on a quiet machine, and took 33 s under
		// make test's parallel load (each node's create timing out and
		// retrying until the streams had leaders): the wait is for the
		// cluster to form, not a bound on oxiosd.
		t0 := time.Now()
		fleetWait(t, 120*time.Second, "ox-status on a to show three live nodes", func() bool {
			n := fleetNodes(a)
			return len(n) == 3 && n["a"] && n["b"] && n["c"]
		})
		t.Logf("three live nodes after %s", time.Since(t0).Round(time.Millisecond))
		r := a.ox("", "ox-status")
		if !strings.Contains(r.stdout, "node a of a fleet of 3") {
			t.Fatalf("ox-status does not name the fleet:\n%s", r.stdout)
		}
	})

	t.Run("placement", func(t *testing.T) {
		r := a.ox("", "ox-spawn", "--node", "b", "-a", "ops", "-n", "--json", "--", "sh", "-c", "echo from-b; exit 3")
		if r.code != 3 {
			t.Fatalf("ox-spawn --node b: exit %d, want the run's 3; stderr: %s\nstdout: %s", r.code, r.stderr, r.stdout)
		}
		var out, exit bool
		for _, rec := range fleetRecords(t, r.stdout) {
			if rec["node"] != "b" {
				t.Errorf("a record without node b: %v", rec)
			}
			out = out || rec["type"] == "output" && strings.Contains(fmt.Sprint(rec["text"]), "from-b")
			exit = exit || rec["type"] == "exit"
		}
		if !out || !exit {
			t.Fatalf("the run's output and exit did not stream back: %s", r.stdout)
		}
		// The run is b's: its audit log has the spawn, a's does not.
		if s := b.ox("", "ox-audit", "log", "--json", "--op", "run.spawn").stdout; !strings.Contains(s, "ops") {
			t.Fatalf("b's audit log has no spawn of ops:\n%s", s)
		}
		if s := a.ox("", "ox-audit", "log", "--json", "--op", "run.spawn").stdout; strings.Contains(s, "ops") {
			t.Fatalf("a's audit log has the spawn that ran on b:\n%s", s)
		}
		// Stdin past the servers' largest message (1 MiB) goes through
		// the object store, up to limits.max_value.
		big := strings.Repeat("0123456789abcdef", 3<<20/16) + "\n"
		r = a.ox(big, "ox-spawn", "--node", "b", "-a", "ops", "--json", "--", "wc", "-c")
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf(`"text":"%d"`, len(big))) {
			t.Fatalf("ox-spawn --node b with %d bytes of stdin: exit %d; stderr: %s\nstdout: %s", len(big), r.code, r.stderr, r.stdout)
		}
		r = a.ox("", "ox-spawn", "--node", "nosuch", "-a", "ops", "-n", "--", "true")
		if r.code == 0 || !strings.Contains(r.stderr, `node "nosuch" is not in [fleet.peers]`) {
			t.Fatalf("a spawn on a node that is not there: exit %d, stderr %q", r.code, r.stderr)
		}
		r = a.ox("", "ox-spawn", "--node", "any", "-a", "ops", "-n", "--json", "--", "true")
		if r.code != 0 || !strings.Contains(r.stdout, `"node":`) {
			t.Fatalf("ox-spawn --node any: exit %d; %s %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("ps-events", func(t *testing.T) {
		ev := exec.Command(bin("ox-events"), "--fleet", "--json", "-t", "state.*")
		ev.Env = append(os.Environ(), "OXIOS_SOCKET="+a.sock)
		evOut := &syncBuffer{}
		ev.Stdout, ev.Stderr = evOut, evOut
		if err := ev.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { ev.Process.Kill(); ev.Wait() }()

		r := a.ox("", "ox-spawn", "--node", "c", "-d", "-a", "ops", "-n", "--", "sleep", "30")
		if r.code != 0 {
			t.Fatalf("detached spawn on c: %d %s", r.code, r.stderr)
		}
		r = a.ox("", "ox-ps", "--fleet", "--json")
		var onC bool
		for _, rec := range fleetRecords(t, r.stdout) {
			onC = onC || rec["node"] == "c" && rec["state"] == "running"
		}
		if r.code != 0 || !onC {
			t.Fatalf("ox-ps --fleet on a does not show the run on c (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = a.ox("", "ox-top", "--fleet", "--json", "-n", "1")
		nodes := map[any]bool{}
		for _, rec := range fleetRecords(t, r.stdout) {
			if rec["type"] == "resources" {
				nodes[rec["node"]] = true
			}
		}
		if r.code != 0 || len(nodes) != 3 || !nodes["a"] || !nodes["b"] || !nodes["c"] {
			t.Fatalf("ox-top --fleet: want a resources record of a, b and c (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
		}
		// A call carries only the ops that may travel: the refusal is
		// the caller's daemon's, audited there.
		cl := a.client(t)
		if _, err := cl.FleetCall(context.Background(), "b", "state.save", map[string]string{"agent": "ops", "key": "x", "value": "y"}, func(json.RawMessage) error { return nil }); err == nil || !strings.Contains(err.Error(), "does not go to other nodes") {
			t.Fatalf("fleet.call of state.save: %v", err)
		}
		if s := a.ox("", "ox-audit", "log", "--json", "--op", "fleet.call").stdout; !strings.Contains(s, "EINVAL") {
			t.Fatalf("the refused fleet.call is not in a's audit log:\n%s", s)
		}
		// Events of b and c reach a's reader, each with its node. The
		// subscription is up once a first save shows.
		fleetWait(t, 30*time.Second, "b's state events on a's fleet-wide ox-events", func() bool {
			b.ox("", "ox-state", "save", "-a", "ops", "k", "v")
			return strings.Contains(evOut.String(), `"node":"b"`)
		})
		c.ox("", "ox-state", "save", "-a", "ops", "k2", "v")
		fleetWait(t, 30*time.Second, "c's state events", func() bool { return strings.Contains(evOut.String(), `"node":"c"`) })
	})

	// Before the subtests that kill a NATS server and restart c (whose
	// restarted daemon ends with its subtest).
	t.Run("trust", func(t *testing.T) { fleetTrust(t, nc, a, b, c) })

	t.Run("home", func(t *testing.T) { fleetHome(t, nc, a, b, c) })

	t.Run("reattach", func(t *testing.T) {
		// A run placed on b and left (-d) is found again from a: waited
		// for, attached to, killed, each with --node.
		spawn := func(script string) string {
			r := a.ox("", "ox-spawn", "--node", "b", "-a", "ops", "-d", "--json", "--", "sh", "-c", script)
			recs := fleetRecords(t, r.stdout)
			if r.code != 0 || len(recs) == 0 || recs[0]["id"] == nil {
				t.Fatalf("ox-spawn --node b -d: %d %s %s", r.code, r.stdout, r.stderr)
			}
			return recs[0]["id"].(string)
		}
		id := spawn("sleep 1; echo done; exit 6")
		if r := a.ox("", "ox-wait", "--node", "b", id); r.code != 6 {
			t.Fatalf("ox-wait --node b %s: exit %d (want the run's 6): %s %s", id, r.code, r.stdout, r.stderr)
		}
		if r := a.ox("", "ox-attach", "--node", "b", "--json", id); r.code != 6 || !strings.Contains(r.stdout, `"text":"done"`) {
			t.Fatalf("ox-attach --node b %s: exit %d: %s %s", id, r.code, r.stdout, r.stderr)
		}
		id = spawn("sleep 60")
		if r := a.ox("", "ox-kill", "--node", "b", "-s", "KILL", id); r.code != 0 {
			t.Fatalf("ox-kill --node b %s: exit %d: %s", id, r.code, r.stderr)
		}
		if r := a.ox("", "ox-wait", "--node", "b", id); r.code != 137 {
			t.Fatalf("ox-wait --node b after ox-kill -s KILL: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		if r := a.ox("", "ox-wait", id); r.code == 0 {
			t.Fatalf("ox-wait of b's run on a (without --node): exit 0: %s", r.stdout)
		}
	})

	t.Run("partition", func(t *testing.T) {
		// b's NATS server stops answering (SIGSTOP: its connections stay
		// open, silent) for longer than a caller used to wait, while a run
		// placed on b goes on: b leaves it for another server of the
		// cluster, and the caller on a gets the run's true end, once.
		cmd := exec.Command(bin("ox-spawn"), "--node", "b", "-a", "ops", "-n", "--json", "--", "sh", "-c", "echo started; sleep 9; echo finished; exit 7")
		cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+a.sock)
		out := &syncBuffer{}
		var errb syncBuffer
		cmd.Stdout, cmd.Stderr = out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		fleetWait(t, 30*time.Second, "the run on b to start", func() bool { return strings.Contains(out.String(), "started") })
		nc.procs[1].Process.Signal(syscall.SIGSTOP)
		time.Sleep(12 * time.Second)
		nc.procs[1].Process.Signal(syscall.SIGCONT)
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 7 || strings.Count(out.String(), `"text":"finished"`) != 1 || strings.Count(out.String(), `"type":"exit"`) != 1 {
			t.Fatalf("a run on b across its NATS server stopped for 12 s: exit %d (want the run's 7, once); stdout:\n%s\nstderr: %s", code, out.String(), errb.String())
		}
		// The cluster takes its stopped server back (its streams catch up,
		// their leaders are elected again: seconds, or half a minute under
		// make test's load) before the next subtest kills another.
		fleetWait(t, 120*time.Second, "spawns on b to work again after the partition", func() bool {
			return a.ox("", "ox-spawn", "--node", "b", "-a", "ops", "-n", "--", "true").code == 0
		})
	})

	t.Run("nats-server-killed-mid-run", func(t *testing.T) {
		cmd := exec.Command(bin("ox-spawn"), "--node", "b", "-a", "ops", "-n", "--json", "--", "sh", "-c", "echo started; sleep 3; echo finished; exit 5")
		cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+a.sock)
		out := &syncBuffer{}
		var errb syncBuffer
		cmd.Stdout, cmd.Stderr = out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		fleetWait(t, 30*time.Second, "the run on b to start", func() bool { return strings.Contains(out.String(), "started") })
		nc.kill9(0) // a's server
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 5 || !strings.Contains(out.String(), "finished") {
			t.Fatalf("with a's NATS server killed mid-run: exit %d (want the run's 5); stdout:\n%s\nstderr: %s", code, out.String(), errb.String())
		}
	})

	t.Run("audit-rewrite-witnessed", func(t *testing.T) {
		for i := range 3 {
			c.ox("", "ox-state", "save", "-a", "ops", fmt.Sprint("w", i), "v")
			if r := c.ox("", "ox-commit", "-a", "ops", "-m", "witnessed"); r.code != 0 {
				t.Fatalf("commit on c: %s", r.stderr)
			}
		}
		seq := headSeq(t, c)
		// Peers keep the heads they saw, on disk.
		for _, w := range []*daemon{a, b} {
			fleetWait(t, 30*time.Second, "a peer to keep c's head", func() bool {
				data, _ := os.ReadFile(filepath.Join(w.data, "fleet", "witness", "c.jsonl"))
				return strings.Contains(string(data), fmt.Sprintf(`"seq":%d,`, seq))
			})
		}
		// The subtest before killed a NATS server: until the cluster has
		// moved the node bucket's leader (seconds under load), listing the
		// nodes times out, and verify says so (EHOSTUNREACH).
		var last result
		fleetWait(t, 60*time.Second, "verify on c before the rewrite to pass", func() bool {
			last = c.ox("", "ox-audit", "verify")
			if last.code != 0 && !strings.Contains(last.stderr, "EHOSTUNREACH") {
				t.Fatalf("verify on c before the rewrite: %d %s %s", last.code, last.stdout, last.stderr)
			}
			return last.code == 0
		})
		c.stop()
		rewriteAudit(t, filepath.Join(c.data, "audit"), 5)
		c = startDaemon(t, daemonOpts{config: cfgs["c"], dir: c.dir})
		// Alone, the rewritten chain verifies: the hole the fleet closes.
		if r := c.ox("", "ox-audit", "verify", "--local"); r.code != 0 {
			t.Fatalf("the consistent rewrite should pass a local verify: %d %s", r.code, r.stderr)
		}
		fleetWait(t, 30*time.Second, "c back in the fleet", func() bool { return len(fleetNodes(c)) == 3 })
		r := c.ox("", "ox-audit", "verify", "--json")
		if r.code != 1 || !strings.Contains(r.stderr, "rewritten") || !strings.Contains(r.stderr, "of node c") {
			t.Fatalf("ox-audit verify on the rewritten node: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		// Each witness names the entry: the rewrite (from entry 5) lies
		// after the newest head that still matches and at or before the
		// first that does not.
		witnesses := 0
		for _, rec := range fleetRecords(t, r.stdout) {
			if rec["type"] != "witness" {
				continue
			}
			witnesses++
			first, _ := rec["first_bad"].(float64)
			last, _ := rec["last_good"].(float64)
			if rec["ok"] != false || first < 5 || last >= 5 || rec["node"] != "c" || (rec["witness"] != "a" && rec["witness"] != "b") {
				t.Errorf("witness record: %v", rec)
			}
		}
		if witnesses != 2 {
			t.Fatalf("want the records of witnesses a and b, got %d:\n%s", witnesses, r.stdout)
		}
		// The peers raise it too, once c publishes its changed head.
		fleetWait(t, 30*time.Second, "a's ox-status to flag node c", func() bool {
			n := fleetNodes(a)
			ok, there := n["c"]
			return there && !ok
		})
	})

	t.Run("home-charge-crash", func(t *testing.T) {
		// A charge is never lost nor counted twice across crashes: a
		// places lim on b and is killed (-9) while the run goes on; the
		// run ends on b, whose charge to a finds no one; b is killed (-9)
		// after the end was told; both start again (on the servers still
		// up), and the charge arrives on a once.
		// The cluster, a server short since the subtests before, may
		// still be moving its streams' leaders (EHOSTUNREACH meanwhile).
		var r result
		t1 := time.Now()
		fleetWait(t, 120*time.Second, "a spawn of lim placed on b", func() bool {
			r = a.ox("", "ox-spawn", "--node", "b", "-a", "lim", "-d", "--json", "--", "sleep", "2")
			if r.code != 0 && !strings.Contains(r.stderr, "EHOSTUNREACH") {
				t.Fatalf("ox-spawn --node b -d: %d %s %s", r.code, r.stdout, r.stderr)
			}
			return r.code == 0
		})
		recs := fleetRecords(t, r.stdout)
		if len(recs) == 0 || recs[0]["id"] == nil {
			t.Fatalf("ox-spawn --node b -d: %s %s", r.stdout, r.stderr)
		}
		run := recs[0]["id"].(string)
		t.Logf("placed %s on b after %s", run, time.Since(t1).Round(time.Millisecond))
		a.kill9()
		if r := b.ox("", "ox-wait", run); r.code != 0 {
			t.Fatalf("ox-wait %s on b: exit %d %s", run, r.code, r.stderr)
		}
		// The end is told: what b owes a is on its disk. Its first
		// attempt found no one (a is down).
		fleetWait(t, 30*time.Second, "b's first attempt at the charge", func() bool {
			return strings.Contains(b.stderr.String(), "not charged to its home yet")
		})
		b.kill9()
		// a first: b sends what it owes as it starts, read from its disk.
		servers := []string{nc.urls[1], nc.urls[2]} // the first was killed above
		t0 := time.Now()
		a2 := startDaemon(t, daemonOpts{config: fleetConfig(nc, "a", []string{"a", "b", "c"}, servers...), dir: a.dir})
		b2 := startDaemon(t, daemonOpts{config: fleetConfig(nc, "b", []string{"a", "b", "c"}, servers...), dir: b.dir})
		charged := func() (n int) {
			for _, rec := range fleetRecords(t, a2.ox("", "ox-audit", "log", "--json", "--op", "budget.charge").stdout) {
				actor, _ := rec["actor"].(map[string]any)
				if strings.Contains(fmt.Sprint(rec["target"]), run) && actor["node"] == "b" && rec["result"] == "ok" {
					n++
				}
			}
			return n
		}
		fleetWait(t, 120*time.Second, "b's charge of "+run+" on a after both restarted", func() bool { return charged() > 0 })
		t.Logf("the charge arrived %s after the restarts began", time.Since(t0).Round(time.Millisecond))
		// b has the answer, and removed what it owed: nothing is sent again.
		fleetWait(t, 30*time.Second, "b to note a's answer", func() bool {
			return strings.Contains(b2.ox("", "ox-audit", "log", "--json", "--op", "budget.charge").stdout, run+" [charged on home a]")
		})
		if n := charged(); n != 1 {
			t.Fatalf("run %s charged %d times on a, want once", run, n)
		}
	})

	t.Run("alone-unchanged", func(t *testing.T) {
		d := startDaemon(t, daemonOpts{})
		r := d.ox("", "ox-status", "--json")
		if !strings.Contains(r.stdout, "alone: no [fleet] servers") {
			t.Fatalf("ox-status of a daemon alone:\n%s", r.stdout)
		}
		r = d.ox("", "ox-ps", "--fleet")
		if r.code == 0 || !strings.Contains(r.stderr, "ENOTCONN") && !strings.Contains(r.stderr, "not in a fleet") {
			t.Fatalf("ox-ps --fleet alone: exit %d %q", r.code, r.stderr)
		}
		// A backup of the history to a git remote (here a bare
		// repository on disk), audited; a remote that is not one fails.
		bare := filepath.Join(t.TempDir(), "backup.git")
		if out, err := exec.Command("git", "init", "-q", "--bare", bare).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		d.ox("", "ox-state", "save", "-a", "ops", "k", "v")
		if r := d.ox("", "ox-commit", "-a", "ops", "-m", "to back up"); r.code != 0 {
			t.Fatalf("commit: %s", r.stderr)
		}
		r = d.ox("", "ox-commit", "push", "--json", bare)
		var push struct{ Commit, Ref string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &push) != nil || push.Commit == "" {
			t.Fatalf("ox-commit push: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		out, err := exec.Command("git", "--git-dir", bare, "log", "-1", "--format=%H %s", push.Ref).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), push.Commit) || !strings.Contains(string(out), "to back up") {
			t.Fatalf("the backup does not hold the commit %s: %v %s", push.Commit, err, out)
		}
		if s := d.ox("", "ox-audit", "log", "--json", "--op", "version.push").stdout; !strings.Contains(s, bare) || !strings.Contains(s, `"result":"ok"`) {
			t.Fatalf("the push is not audited:\n%s", s)
		}
		if r := d.ox("", "ox-commit", "push", filepath.Join(t.TempDir(), "nothing-here")); r.code != 1 || !strings.Contains(r.stderr, "EIO") {
			t.Fatalf("a push to no repository: exit %d %q", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(d.data, "fleet")); !os.IsNotExist(err) {
			t.Fatalf("a daemon alone made %s/fleet: %v", d.data, err)
		}
		d.checkAudit()
	})
	for _, d := range []*daemon{a, b} {
		d.checkAudit()
	}
}

func headSeq(t *testing.T, d *daemon) uint64 {
	t.Helper()
	r := d.ox("", "ox-audit", "verify", "--local", "--json")
	var rec struct {
		HeadSeq uint64 `json:"head_seq"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &rec); err != nil || rec.HeadSeq == 0 {
		t.Fatalf("no head: %q %v", r.stdout, err)
	}
	return rec.HeadSeq
}

// rewriteAudit rewrites the stopped daemon's log from entry from on, and
// re-hashes the chain and the head after it: the tampering a local
// verify cannot see.
func rewriteAudit(t *testing.T, dir string, from uint64) {
	t.Helper()
	old, err := audit.Open(dir, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var entries []*audit.Entry
	if err := old.Scan(1, func(e *audit.Entry, _ []byte) error { entries = append(entries, e); return nil }); err != nil {
		t.Fatal(err)
	}
	old.Close()
	if uint64(len(entries)) < from {
		t.Fatalf("only %d entries", len(entries))
	}
	entries[from-1].Target = "ops:nothing-happened-here"
	tmp := dir + ".new"
	nl, err := audit.Open(tmp, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.Append(entries); err != nil {
		t.Fatal(err)
	}
	if err := nl.Sync(); err != nil {
		t.Fatal(err)
	}
	nl.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
}

// fleetTrust attacks the fleet's trust (issue 44) as an outsider would:
// each attempt is refused, and the refusal is on the called node's audit
// log with the node the call claimed to come from.
func fleetTrust(t *testing.T, nc *natsCluster, a, b, c *daemon) {
	// No credentials: NATS itself refuses.
	if conn, err := nats.Connect(nc.urls[1], nats.MaxReconnects(0)); err == nil || !strings.Contains(err.Error(), "Authorization") {
		if conn != nil {
			conn.Close()
		}
		t.Errorf("a client without credentials: %v", err)
	}
	// A client with credentials that is no node: its calls are not
	// signed by any peer's key.
	opt, err := nats.NkeyOptionFromSeed(nc.seeds["intruder"])
	if err != nil {
		t.Fatal(err)
	}
	in, err := nats.Connect(strings.Join(nc.urls, ","), opt)
	if err != nil {
		t.Fatalf("the intruder (a NATS user that is no node) could not connect: %v", err)
	}
	defer in.Close()
	spawn, _ := json.Marshal(map[string]any{"agent": "payroll", "command": []string{"/bin/sh", "-c", "ox-state save pwned yes"}})
	call := func(node string, msg []byte) string {
		rep, err := in.Request("oxios.call."+node, msg, 5*time.Second)
		if err != nil {
			t.Logf("call to %s: no answer: %v", node, err)
			return "no answer: " + err.Error()
		}
		t.Logf("call to %s: %s", node, rep.Data)
		return string(rep.Data)
	}
	unsigned, _ := json.Marshal(map[string]any{"id": "forged-1", "from": "a", "op": "run.spawn", "args": json.RawMessage(spawn),
		"cred": map[string]any{"uid": 0, "admin": true}, "to": "b", "expires": time.Now().Add(29 * time.Second).UnixMilli()})
	if got := call("b", unsigned); !strings.Contains(got, "EACCES") {
		t.Errorf("an unsigned call claiming node a, as admin: %s", got)
	}
	// Signed with the intruder's own key, claiming a.
	ikp, _ := nkeys.FromSeed(mustRead(t, nc.seeds["intruder"]))
	sign := func(kp nkeys.KeyPair, body []byte) []byte {
		sig, _ := kp.Sign(body)
		b, _ := json.Marshal(map[string]any{"body": json.RawMessage(body), "sig": base64.RawStdEncoding.EncodeToString(sig)})
		return b
	}
	if got := call("b", sign(ikp, unsigned)); !strings.Contains(got, "EACCES") || !strings.Contains(got, "did not sign") {
		t.Errorf("a call claiming node a, signed by another key: %s", got)
	}
	// A member node's own key, claiming admin where its admin is not
	// trusted: b's admin calls c as a user granted nothing.
	bkp, _ := nkeys.FromSeed(mustRead(t, nc.seeds["b"]))
	asB := func(id, to string) []byte {
		body, _ := json.Marshal(map[string]any{"id": id, "from": "b", "op": "run.spawn", "args": json.RawMessage(spawn),
			"cred": map[string]any{"uid": 0, "admin": true}, "to": to, "expires": time.Now().Add(29 * time.Second).UnixMilli()})
		return sign(bkp, body)
	}
	before := c.ox("", "ox-state", "ls", "-a", "payroll").stdout
	call("c", asB("b-admin-1", "c"))
	// A legitimate call, sent again: refused as seen.
	legit := asB("b-replay-1", "a")
	call("a", legit)
	if got := call("a", legit); !strings.Contains(got, "seen before") {
		t.Errorf("a signed call sent again: %s", got)
	}
	// Sent to another node than the one it names.
	if got := call("c", asB("b-wrong-node", "a")); !strings.Contains(got, "for node") {
		t.Errorf("a signed call for a, sent to c: %s", got)
	}
	var clog string
	for i := 0; i < 150 && !strings.Contains(clog, `"node":"b"`); i++ {
		time.Sleep(100 * time.Millisecond)
		clog = c.ox("", "ox-audit", "log", "--json").stdout
	}
	if !strings.Contains(clog, `"node":"b"`) || !strings.Contains(clog, "payroll") {
		t.Errorf("c's audit log lacks the refusal of b's admin, with node b:\n%s", clog)
	}
	if after := c.ox("", "ox-state", "ls", "-a", "payroll").stdout; after != before || strings.Contains(after, "pwned") {
		t.Errorf("payroll's state on c changed: %q -> %q", before, after)
	}
	log := b.ox("", "ox-audit", "log", "--json", "--op", "fleet.call").stdout
	if !strings.Contains(log, `"node":"a"`) || !strings.Contains(log, "EACCES") {
		t.Errorf("b's audit log lacks the refused forged calls with the node they claimed:\n%s", log)
	}
	// The intruder watches b's calls and the reply stream: it answers a
	// call's records with a forged end, and reads what it can of them.
	js, err := jetstream.New(in)
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan string, 4)
	sub, err := in.Subscribe("oxios.call.b", func(m *nats.Msg) {
		var sm struct{ Body json.RawMessage }
		var cm struct{ ID string }
		if json.Unmarshal(m.Data, &sm) == nil && json.Unmarshal(sm.Body, &cm) == nil && cm.ID != "" {
			for _, forged := range []string{`{"item":{"type":"output","text":"FORGED"}}`, `{"item":{"type":"exit","status":0,"text":"FORGED"}}`, `{"done":true}`} {
				js.Publish(context.Background(), "oxios.reply."+cm.ID, []byte(forged))
			}
			ids <- cm.ID
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r := a.ox("", "ox-spawn", "--node", "b", "-a", "ops", "-n", "--json", "--", "sh", "-c", "sleep 1; echo TOPSECRET; exit 4")
	sub.Unsubscribe()
	if r.code != 4 || !strings.Contains(r.stdout, `"text":"TOPSECRET"`) || strings.Contains(r.stdout, "FORGED") {
		t.Errorf("a call whose records an intruder forged: exit %d (want the run's 4): %s %s", r.code, r.stdout, r.stderr)
	}
	select {
	case id := <-ids:
		cons, err := js.OrderedConsumer(context.Background(), "OXIOS_REPLY", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"oxios.reply." + id}})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if strings.Contains(string(m.Data()), "TOPSECRET") || strings.Contains(string(m.Data()), `"type"`) && !strings.Contains(string(m.Data()), "FORGED") {
				t.Errorf("the intruder read a record of the call in the reply stream: %q", m.Data())
			}
		}
		if n < 4 {
			t.Errorf("the intruder saw %d messages of the call in the reply stream: the check above proves nothing", n)
		}
	default:
		t.Error("the intruder saw no call to b: the checks above prove nothing")
	}

	// A forged head of a: ignored by its peers, never an alarm on a.
	forged, _ := json.Marshal(map[string]any{"seq": 1, "hash": strings.Repeat("0", 64), "time": time.Now().UTC()})
	for range 3 {
		in.Publish("oxios.head.a", forged)
	}
	in.Flush()
	time.Sleep(time.Second)
	if r := a.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Errorf("a forged head of a made a's verify fail: %d %s", r.code, r.stderr)
	}
	if w, _ := os.ReadFile(filepath.Join(b.data, "fleet", "witness", "a.jsonl")); strings.Contains(string(w), strings.Repeat("0", 64)) {
		t.Errorf("b kept a forged head of a")
	}

	// A node's own NATS user (its key, stolen) may not use another
	// node's subjects: the servers refuse it, before any signature is
	// checked. Its own subjects it may use (the check can fail).
	perms := make(chan error, 8)
	bopt, err := nats.NkeyOptionFromSeed(nc.seeds["b"])
	if err != nil {
		t.Fatal(err)
	}
	asNode, err := nats.Connect(strings.Join(nc.urls[1:], ","), bopt, nats.CustomInboxPrefix(fleet.InboxPrefix("b")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { perms <- err }))
	if err != nil {
		t.Fatalf("b's NATS user: %v", err)
	}
	defer asNode.Close()
	denied := func(what string, do func() error) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		asNode.Flush()
		select {
		case err := <-perms:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("%s: %v, want a permissions violation", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the servers let b's user do it", what)
		}
	}
	denied("b's user publishing a head of a", func() error { return asNode.Publish("oxios.head.a", forged) })
	denied("b's user taking the calls to a", func() error { _, err := asNode.SubscribeSync("oxios.call.a"); return err })
	denied("b's user writing a's entry in the nodes bucket", func() error { return asNode.Publish("$KV.oxios_nodes.a", []byte("{}")) })
	denied("b's user reading another's inbox", func() error { _, err := asNode.SubscribeSync(fleet.InboxPrefix("a") + ".>"); return err })
	if _, err := asNode.Request("oxios.ping.a", nil, 5*time.Second); err != nil {
		t.Errorf("b's user may not ping a, as a node must: %v", err)
	}
	select {
	case err := <-perms:
		t.Errorf("b's user was refused what a node does: %v", err)
	default:
	}
}

// fleetSign is body, a fleet call, signed with the seed of file.
func fleetSign(t *testing.T, file string, body []byte) []byte {
	t.Helper()
	kp, err := nkeys.FromSeed(mustRead(t, file))
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := kp.Sign(body)
	b, _ := json.Marshal(map[string]any{"body": json.RawMessage(body), "sig": base64.RawStdEncoding.EncodeToString(sig)})
	return b
}

// fleetCharge sends, over conn, a charge of run of agent to node to,
// signed as node from, and returns the called node's answer: the done
// message of the call's records (plain: the call names no reply key).
func fleetCharge(t *testing.T, nc *natsCluster, conn *nats.Conn, from, to, agent, run string) string {
	t.Helper()
	id := fmt.Sprintf("charge-%s-%d", from, time.Now().UnixNano())
	args, _ := json.Marshal(map[string]any{"agent": agent, "run": run, "used": map[string]any{"wall": 100}})
	body, _ := json.Marshal(map[string]any{"id": id, "from": from, "op": "fleet.home-charge", "args": json.RawMessage(args),
		"cred": map[string]any{"uid": 0}, "to": to, "expires": time.Now().Add(20 * time.Second).UnixMilli()})
	if _, err := conn.Request("oxios.call."+to, fleetSign(t, nc.seeds[from], body), 10*time.Second); err != nil {
		t.Fatalf("a charge to %s: %v", to, err)
	}
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	var done string
	fleetWait(t, 30*time.Second, "the answer to a charge", func() bool {
		cons, err := js.OrderedConsumer(context.Background(), "OXIOS_REPLY", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"oxios.reply." + id}})
		if err != nil {
			return false
		}
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			return false
		}
		for m := range batch.Messages() {
			if strings.Contains(string(m.Data()), `"done":true`) {
				done = string(m.Data())
			}
		}
		return done != ""
	})
	return done
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.TrimSpace(string(b)))
}

// fleetHome: an agent's policy and budget go with its runs. lim lives on
// a, which may not write state; a run of it placed on b runs under that
// policy, b keeps it as a guest's, which b's operator may not change, and
// the run's use is charged to a's budget once. An agent that lives on b
// is not taken over by a's of the same name.
func fleetHome(t *testing.T, nc *natsCluster, a, b, c *daemon) {
	narrow := sectionPolicy(t, map[string]string{
		"state":  "read = [\"**\"]\nwrite = []\nquota = \"1MiB\"",
		"budget": "tokens = 0\ncost = 0.0\nwall = \"1h\"\nexecs = 0\nrun_tokens = 0\nrun_cost = 0.0\nrun_wall = \"1h\"\nrun_execs = 1000",
	})
	if r := a.ox("", "ox-policy", "set", "-a", "lim", narrow); r.code != 0 {
		t.Fatalf("ox-policy set on a: %d %s", r.code, r.stderr)
	}
	r := a.ox("", "ox-spawn", "--node", "b", "-a", "lim", "-n", "--json", "--", "ox-state", "save", "x", "1")
	if r.code != 77 {
		t.Fatalf("a write of lim placed on b under a's policy that refuses it: exit %d, want 77; stderr: %s\nstdout: %s", r.code, r.stderr, r.stdout)
	}
	run := ""
	for _, rec := range fleetRecords(t, r.stdout) {
		if rec["type"] == "run" && run == "" {
			run, _ = rec["id"].(string)
		}
	}
	if run == "" {
		t.Fatalf("no run record in %s", r.stdout)
	}
	if s := b.ox("", "ox-audit", "log", "--json", "--op", "state.save").stdout; !strings.Contains(s, "EPERM") || !strings.Contains(s, "lim") {
		t.Fatalf("b's audit log has no refused save of lim:\n%s", s)
	}
	show := b.ox("", "ox-policy", "show", "-a", "lim")
	if show.code != 0 || !strings.Contains(show.stdout, "a guest of node a") || !strings.Contains(show.stdout, "write = []") {
		t.Fatalf("lim's policy on b is not a's, kept as a guest's: %d\n%s%s", show.code, show.stdout, show.stderr)
	}
	wide := writePolicy(t, string(share.DefaultPolicy))
	if r := b.ox("", "ox-policy", "set", "-a", "lim", wide); r.code != 77 || !strings.Contains(r.stderr, "home is node a") {
		t.Fatalf("b's operator set the policy of a's guest: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := b.ox("", "ox-budget", "reset", "-a", "lim"); r.code != 77 {
		t.Fatalf("b's operator reset the budget of a's guest: exit %d, stderr %q", r.code, r.stderr)
	}
	// The run's use is charged to lim on a, once, by b.
	fleetWait(t, 60*time.Second, "b's charge of the run to a", func() bool {
		return strings.Contains(a.ox("", "ox-audit", "log", "--json", "--op", "budget.charge").stdout, run)
	})
	charges := 0
	for _, rec := range fleetRecords(t, a.ox("", "ox-audit", "log", "--json", "--op", "budget.charge").stdout) {
		if strings.Contains(fmt.Sprint(rec["target"]), run) {
			charges++
			if actor, _ := rec["actor"].(map[string]any); actor["node"] != "b" || rec["result"] != "ok" {
				t.Errorf("the charge is not b's, or not ok: %v", rec)
			}
		}
	}
	if charges != 1 {
		t.Fatalf("run %s charged %d times on a, want once", run, charges)
	}
	// a chose the run's id and noted the placement before the call.
	if s := a.ox("", "ox-audit", "log", "--json", "--op", "budget.set").stdout; !strings.Contains(s, "run "+run+" [placed on b]") {
		t.Fatalf("a's audit log does not note the placement of %s on b:\n%s", run, s)
	}
	var bud struct {
		Used struct {
			Wall float64 `json:"wall"`
		} `json:"used"`
	}
	if err := json.Unmarshal([]byte(a.ox("", "ox-budget", "show", "-a", "lim", "--json").stdout), &bud); err != nil || bud.Used.Wall <= 0 {
		t.Fatalf("lim's wall time on a after its run on b: %v (%v)", bud.Used.Wall, err)
	}
	// The charge sent again by b (its answer lost) is answered as
	// applied, not counted; one from c, where a placed no such run, and
	// one of a run a never placed, are refused and audited with c's name.
	opt, err := nats.NkeyOptionFromSeed(nc.seeds["intruder"])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := nats.Connect(strings.Join(nc.urls, ","), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := fleetCharge(t, nc, conn, "b", "a", "lim", run); !strings.Contains(got, `"already":true`) {
		t.Errorf("b's charge of %s sent again: %s", run, got)
	}
	if got := fleetCharge(t, nc, conn, "c", "a", "lim", run); !strings.Contains(got, "EPERM") {
		t.Errorf("c's charge of b's run %s: %s", run, got)
	}
	if got := fleetCharge(t, nc, conn, "b", "a", "lim", "rneverplac"); !strings.Contains(got, "EPERM") {
		t.Errorf("b's charge of a run a never placed: %s", got)
	}
	var again struct {
		Used struct {
			Wall float64 `json:"wall"`
		} `json:"used"`
	}
	json.Unmarshal([]byte(a.ox("", "ox-budget", "show", "-a", "lim", "--json").stdout), &again)
	if again.Used.Wall != bud.Used.Wall {
		t.Errorf("lim's wall time on a went from %v to %v with charges a took none of", bud.Used.Wall, again.Used.Wall)
	}
	refused := false
	for _, rec := range fleetRecords(t, a.ox("", "ox-audit", "log", "--json", "--op", "budget.charge").stdout) {
		actor, _ := rec["actor"].(map[string]any)
		refused = refused || actor["node"] == "c" && rec["result"] == "EPERM" && strings.Contains(fmt.Sprint(rec["target"]), run)
	}
	if !refused {
		t.Errorf("a's audit log lacks c's refused charge of %s", run)
	}
	// A change at home goes with the next run.
	if r := a.ox("", "ox-policy", "set", "-a", "lim", wide); r.code != 0 {
		t.Fatalf("ox-policy set on a: %d %s", r.code, r.stderr)
	}
	if r := a.ox("", "ox-spawn", "--node", "b", "-a", "lim", "-n", "--", "ox-state", "save", "x", "1"); r.code != 0 {
		t.Fatalf("a write of lim on b after a's policy allowed it: exit %d; %s", r.code, r.stderr)
	}
	// solo lives on b: a's solo, under another policy, may not run as
	// it there. Under the same policy it may: ops, made on b by the
	// placements above and on a by a save, runs on b as b's.
	b.ox("", "ox-state", "save", "-a", "solo", "k", "b")
	if r := a.ox("", "ox-policy", "set", "-a", "solo", narrow); r.code != 0 {
		t.Fatalf("ox-policy set on a: %d %s", r.code, r.stderr)
	}
	a.ox("", "ox-state", "save", "-a", "ops", "k", "a")
	if r := a.ox("", "ox-spawn", "--node", "b", "-a", "ops", "-n", "--", "true"); r.code != 0 {
		t.Fatalf("ops, under one policy on a and b, placed on b: exit %d; %s", r.code, r.stderr)
	}
	r = a.ox("", "ox-spawn", "--node", "b", "-a", "solo", "-n", "--", "true")
	if r.code != 77 || !strings.Contains(r.stderr, "lives on this node") {
		t.Fatalf("a's solo took over b's: exit %d, stderr %q", r.code, r.stderr)
	}
	// A home sets its agent's policy where it places it, which is an
	// admin's act: c takes it from a (its [fleet] admins), not from b.
	b.ox("", "ox-state", "save", "-a", "bonly", "k", "b")
	if r := b.ox("", "ox-spawn", "--node", "c", "-a", "bonly", "-n", "--", "true"); r.code != 77 || !strings.Contains(r.stderr, "[fleet] admins") {
		t.Fatalf("b placed its agent, with its policy, on c, which does not take b's admin: exit %d, stderr %q", r.code, r.stderr)
	}
	if s := c.ox("", "ox-agents", "ls", "--json").stdout; strings.Contains(s, "bonly") {
		t.Fatalf("c made b's agent:\n%s", s)
	}
	// And a guest is placed from its home only.
	if r := b.ox("", "ox-spawn", "--node", "c", "-a", "lim", "-n", "--", "true"); r.code != 77 || !strings.Contains(r.stderr, "its home, node a") {
		t.Fatalf("b placed a's guest on c: exit %d, stderr %q", r.code, r.stderr)
	}
}
