// Command ox-status checks that Oxios works here: the daemon's socket,
// its mount, its data dir, the config, the policies and the model
// endpoint, and says what to fix. See ox-status(1).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/mountinfo"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	def := proto.DefaultPaths()
	app := cliutil.App("ox-status", "check that Oxios works here, and say what to fix")
	app.Version = version
	app.Description = "Checks, in order: the config file parses; the daemon answers on its socket; its mount is there and answers; it can write its data dir; its runs are sandboxed; the policy files of its policies folder parse; its model endpoint answers, when one is configured. Prints one check record per check (a table on a terminal), with what to do about each that failed, and exits 1 if any failed (69 if the daemon is unreachable, 77 if it refuses this user). Paths come from the daemon when it answers, else from the config file."
	app.Flags = []cli.Flag{
		cliutil.SocketFlag, cliutil.JSONFlag,
		&cli.StringFlag{Name: "config", Usage: "the config file `FILE` to check (\"\" for none)", Value: def.Config, EnvVars: []string{"OXIOS_CONFIG"}, TakesFile: true},
		&cli.DurationFlag{Name: "timeout", Usage: "how long each check may take", Value: 3 * time.Second},
	}
	app.Action = status
	cliutil.Run(app)
}

type checker struct {
	p      *cliutil.Printer
	failed int
}

func (ch *checker) add(name string, err error, ok, fix string) {
	rec := proto.CheckRecord{Type: proto.RecordCheck, Check: name, OK: err == nil, Text: ok}
	mark := "ok"
	if err != nil {
		ch.failed++
		rec.Text, rec.Fix, mark = err.Error(), fix, "FAIL"
	}
	row := rec.Text
	if rec.Fix != "" {
		row += " -- fix: " + rec.Fix
	}
	ch.p.Print(&rec, name, mark, row)
}

func status(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("ox-status takes no arguments (got %q)", c.Args().First())
	}
	timeout := c.Duration("timeout")
	ch := &checker{p: cliutil.NewPrinter(c, "CHECK", "", "WHAT")}
	defer ch.p.Flush()

	// The socket: the daemon answers, and says what it runs with.
	sock := c.String("socket")
	if sock == "" {
		sock = proto.SocketPath()
	}
	ctx, cancel := context.WithTimeout(c.Context, timeout)
	cl, err := client.Dial(ctx, sock)
	var d *proto.DaemonRecord
	if err == nil {
		var rec proto.DaemonRecord
		rec, err = cl.Status(ctx)
		cl.Close()
		if err == nil {
			d = &rec
		}
	}
	cancel()
	// An unreachable daemon is exit 69 and one that refuses this user 77,
	// as for every command (issue 47), once every check has been printed.
	sockCode := cliutil.Code(err)
	if err != nil {
		fix := "start oxiosd: systemctl start oxiosd.socket (the system's), systemctl --user start oxiosd.socket (yours), or oxiosd & ; if it runs elsewhere, set OXIOS_SOCKET or --socket to its socket"
		var pe *proto.Error
		if errors.As(err, &pe) && (pe.Code == proto.EACCES || pe.Code == proto.EPERM) {
			fix = "ask the admin to grant your user agents in [access.users] of oxios.toml, and the socket's group (socket_group)"
		} else if errors.As(err, &pe) && pe.Code == proto.ENOSYS {
			fix = "this oxiosd is older than ox-status: restart it from the same build"
		}
		ch.add("socket", fmt.Errorf("%s: %v", sock, err), "", fix)
	} else {
		ch.add("socket", nil, fmt.Sprintf("%s answers: %s", sock, d.Text), "")
	}

	// The config: the file the daemon runs with when it says (the
	// admin's), else the one given, else the default oxiosd would read.
	file, explicit := c.String("config"), c.IsSet("config")
	if d != nil && d.Data != "" && !explicit {
		file, explicit = d.Config, true
	}
	cfg, cerr := config.Load(file, explicit)
	switch {
	case cerr != nil:
		ch.add("config", cerr, "", "correct the key or value named (oxios.toml(5) documents each; share/oxios.toml has them all at their defaults); oxiosd applies the file when it changes, or on SIGHUP (systemctl kill -s HUP oxiosd)")
	case file == "" && d != nil:
		ch.add("config", nil, "oxiosd runs with no config file: the defaults", "")
	case file == "":
		ch.add("config", nil, "no config file: the defaults", "")
	case cfg.File == "":
		ch.add("config", nil, file+" does not exist: the defaults", "")
	case d != nil && d.Data != "" && !c.IsSet("config"):
		ch.add("config", nil, file+" (the daemon's) parses", "")
	default:
		ch.add("config", nil, file+" parses", "")
	}

	// The rest from the daemon when it answered, else from the config.
	mount, data, pols, llm := "", cfg.Data, cfg.Policies, cfg.LLM.BaseURL
	if !cfg.NoMount {
		mount = cfg.Mount
	}
	if d != nil {
		mount = d.Mount
		if d.Data != "" { // the admin's: paths
			data, pols, llm = d.Data, d.Policies, d.LLM
		}
	}

	switch {
	case d == nil:
		// A mount at the configured place may be another daemon's: only
		// the daemon that answers says where its own is.
		ch.add("mount", errors.New("not checked: no daemon answered"), "", "start oxiosd (see socket)")
	case mount == "":
		ch.add("mount", nil, "oxiosd serves without a mount (--no-mount)", "")
	case !filepath.IsAbs(mount):
		ch.add("mount", fmt.Errorf("oxiosd mounts at %q, relative to its own folder", mount), "", "give oxiosd an absolute --mount (or mount in oxios.toml)")
	default:
		err := checkMount(mount, timeout)
		ch.add("mount", err, mount+" is mounted and answers",
			"oxiosd runs but its mount is not up: /dev/fuse must exist and, as a user, fusermount3 be installed (make deps); the daemon's log says why (journalctl -u oxiosd); a stale mount left by a crash: fusermount3 -u "+mount+", then restart oxiosd")
	}

	if d != nil {
		label := data
		if d.Data == "" {
			label = "its data dir"
		}
		var err error
		if !d.DataWritable {
			err = fmt.Errorf("oxiosd cannot write %s: %s", label, d.DataError)
		}
		ch.add("data", err, "oxiosd can write "+label, "free space on it (df), make it the daemon user's with mode 0700 and its file system read-write; then restart oxiosd")
	} else {
		err := checkDir(data)
		ch.add("data", err, data+" is writable", "create it (mkdir -m 0700 "+data+") as the user oxiosd runs as, or free space on it")
	}

	if d != nil {
		var err error
		ok := "runs are sandboxed: " + d.Sandbox
		if len(d.SandboxMissing) > 0 {
			ok += " (lacks " + strings.Join(d.SandboxMissing, "; ") + ")"
		}
		if !strings.Contains(d.Sandbox, "namespaces") || !strings.Contains(d.Sandbox, "seccomp") {
			err = fmt.Errorf("the sandbox of runs lacks %s: agents whose policy has [sandbox] isolation = \"full\" (the default) cannot start runs", strings.Join(d.SandboxMissing, "; "))
		}
		ch.add("sandbox", err, ok, "run oxiosd as root on a kernel with mount, pid and network namespaces and seccomp (not in a container that forbids them), or give trusted agents isolation = \"available\" in their policy (oxios-policy(5))")
	}

	if d != nil && d.Repo != "" {
		var err error
		if d.RepoDamaged {
			err = fmt.Errorf("the repository's history is damaged: %s", d.Repo)
		}
		ch.add("repo", err, "the repository is whole: "+d.Repo, "restore DATA/repo/.git from a backup or a pushed remote (git fetch), then git fsck; oxiosd refuses to start on it until then, or oxiosd --recover starts anyway (oxiosd(8), RECOVERY)")
	}

	err = checkPolicies(pols)
	ch.add("policies", err, policiesText(pols), "correct the line named (oxios-policy(5)); ox-policy set -a NAME FILE checks a policy before it applies it")

	if d != nil && d.ConfigError != "" {
		// The file parses here, or not; the daemon's word is what counts.
		ch.add("config-reload", fmt.Errorf("oxiosd refused its config file and runs with the one in force: %s", d.ConfigError), "", "correct the key or value named, then systemctl reload oxiosd or send oxiosd SIGHUP")
	}
	if llm == "" {
		ch.add("llm", nil, "no model endpoint configured: LLM runs are off (process runs work)", "")
	} else {
		msg, err := checkLLM(c.Context, llm, timeout)
		if d != nil && d.LLMCircuit != "" && d.LLMCircuit != "closed" {
			msg += "; oxiosd's circuit breaker for it is " + d.LLMCircuit + " (runs wait for it to cool down)"
		}
		fix := "check that the endpoint runs and is reachable from here, and [llm] base_url in oxios.toml (an OpenAI-compatible API base such as http://localhost:11434/v1)"
		if cfg.LLM.BaseURL == "" || cfg.LLM.URLFromEnv() {
			// base_url is not set: the URL is OPENAI_BASE_URL's (issue 47).
			who := "this environment"
			if d != nil {
				who = "oxiosd's environment"
			}
			fix = "check that the endpoint runs and is reachable from here, and OPENAI_BASE_URL in " + who + ", where the URL comes from ([llm] base_url is not set in oxios.toml; setting it overrides the variable)"
		}
		ch.add("llm", err, msg, fix)
	}
	if d != nil {
		fleetChecks(c.Context, sock, timeout, ch)
	}
	if ch.failed > 0 {
		ch.p.Flush()
		if sockCode == cliutil.ExitUnavailable || sockCode == cliutil.ExitDenied {
			return cliutil.Silent(sockCode)
		}
		return cliutil.Silent(cliutil.ExitFailure)
	}
	return nil
}

// fleetChecks reports the fleet the daemon joined, one check per node: a
// node silent past its heartbeats, or one whose audit heads went back or
// changed, fails.
func fleetChecks(ctx context.Context, sock string, timeout time.Duration, ch *checker) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := client.Dial(ctx, sock)
	if err != nil {
		return
	}
	defer cl.Close()
	var nodes []proto.NodeRecord
	err = cl.FleetStatus(ctx, func(n proto.NodeRecord) error { nodes = append(nodes, n); return nil })
	var pe *proto.Error
	switch {
	case errors.As(err, &pe) && pe.Code == proto.ENOTCONN:
		ch.add("fleet", nil, "alone: no [fleet] servers in oxios.toml", "")
		return
	case errors.As(err, &pe) && pe.Code == proto.ENOSYS:
		return // an older daemon
	case err != nil:
		ch.add("fleet", err, "", "check that the NATS servers of [fleet] servers run and are reachable (nats-server, see oxiosd(8)); the daemon's log says why")
		return
	}
	self := ""
	for _, n := range nodes {
		if n.Self {
			self = n.Node
		}
	}
	if self == "" {
		ch.add("fleet", fmt.Errorf("joined, but this node's heartbeat is not in the fleet yet (%d other nodes)", len(nodes)), "", "wait a heartbeat; if it lasts, the daemon's log says why")
	} else {
		ch.add("fleet", nil, fmt.Sprintf("node %s of a fleet of %d", self, len(nodes)), "")
	}
	for _, n := range nodes {
		var err error
		switch {
		case n.Alarm != "":
			err = fmt.Errorf("%s", n.Text)
		case !n.Alive:
			err = fmt.Errorf("%s: no heartbeat since %s", n.Node, n.Seen.Format(time.RFC3339))
		}
		ch.add("node:"+n.Node, err, n.Text, "on that node: ox-audit verify (a changed audit head), systemctl status oxiosd (a silent one)")
	}
}

// checkMount checks that dir is a mount point in /proc/self/mountinfo and
// that listing it answers within timeout (a hung FUSE daemon does not).
func checkMount(dir string, timeout time.Duration) error {
	_, found, err := mountinfo.At(dir)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%s is not mounted", dir)
	}
	done := make(chan error, 1)
	go func() {
		_, err := os.ReadDir(filepath.Join(dir, "agent"))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s is mounted but does not answer: %v", dir, err)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s is mounted but did not answer within %s", dir, timeout)
	}
}

// checkDir checks that a file can be created in dir (DATA/tmp when it
// exists, as oxiosd would).
func checkDir(dir string) error {
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	in := dir
	if fi, err := os.Stat(filepath.Join(dir, "tmp")); err == nil && fi.IsDir() {
		in = filepath.Join(dir, "tmp")
	}
	f, err := os.CreateTemp(in, "ox-status-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkPolicies parses every NAME.toml of dir; a missing dir is fine (see
// policiesText).
func checkPolicies(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.toml"))
	if err != nil {
		return err
	}
	sort.Strings(names)
	var bad []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err == nil {
			_, err = policy.Parse(b)
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", n, err))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// checkLLM asks the endpoint for its models: any HTTP answer means it is
// reachable (a 401 says the key is wrong, which the runner would report).
func checkLLM(ctx context.Context, base string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := strings.TrimSuffix(base, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: %v", base, err)
	}
	resp.Body.Close()
	return fmt.Sprintf("%s answers (GET /models: %s)", base, resp.Status), nil
}

// policiesText says what a policies folder that checked out holds.
func policiesText(dir string) string {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return dir + " does not exist: no policy files to apply"
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
	if len(names) == 0 {
		return dir + " holds no policy files"
	}
	return fmt.Sprintf("the %d policy files of %s parse", len(names), dir)
}
