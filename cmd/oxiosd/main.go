// Command oxiosd is the Oxios kernel daemon: it owns agent state, the
// audit log and policy, and serves them over a Unix socket. See oxiosd(8).
//
// It is assembled once at start: config -> kernel -> socket server and
// FUSE mount.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/fs"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/fleet"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
	"github.com/oxios/oxios/pkg/serve"
	"github.com/oxios/oxios/pkg/server"
)

var version = "0.1.0-dev"

func main() {
	// Re-run as the shim of a run's sandbox, oxiosd is that and nothing
	// more (package sandbox).
	sandbox.Main()
	def := proto.DefaultPaths()
	app := cliutil.App("oxiosd", "the Oxios kernel daemon")
	app.Version = version
	app.UsageText = "oxiosd [--config FILE] [--data DIR] [--socket PATH] [--mount DIR | --no-mount] [--log-level LEVEL] [--recover]"
	app.Description = "oxiosd owns agent state and the audit log and serves them to ox-* commands over a Unix socket."
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "read configuration from `FILE` (\"\" for none)", Value: def.Config, EnvVars: []string{"OXIOS_CONFIG"}, TakesFile: true},
		&cli.StringFlag{Name: "data", Usage: "data directory `DIR`", DefaultText: def.Data, TakesFile: true},
		&cli.StringFlag{Name: "socket", Usage: "listen on the Unix socket `PATH`", DefaultText: def.Socket, TakesFile: true},
		&cli.StringFlag{Name: "mount", Usage: "mount the agents' filesystem at `DIR`", DefaultText: def.Mount, TakesFile: true},
		&cli.BoolFlag{Name: "no-mount", Usage: "do not mount the agents' filesystem"},
		&cli.StringFlag{Name: "log-level", Usage: "log `LEVEL`: debug, info, warn or error", DefaultText: "info"},
		&cli.BoolFlag{Name: "recover", Usage: "start with what a damaged or missing journal still holds, or on a repository missing objects, recording the loss in the audit log"},
	}
	app.Action = run
	cliutil.Run(app)
}

// configErr is a configuration error: exit 78 (EX_CONFIG), which the unit's
// RestartPreventExitStatus keeps from becoming a restart loop.
func configErr(err error) error {
	return &cliutil.ExitError{Code: cliutil.ExitConfig, Err: err}
}

// settings merges flags over the config file.
func settings(c *cli.Context) (config.Config, error) {
	explicit := c.IsSet("config")
	cfg, err := config.Load(absPath(c.String("config")), explicit)
	if err != nil {
		return cfg, configErr(err)
	}
	for flag, dst := range map[string]*string{"data": &cfg.Data, "socket": &cfg.Socket, "mount": &cfg.Mount, "log-level": &cfg.LogLevel} {
		if c.IsSet(flag) {
			*dst = c.String(flag)
		}
	}
	if c.IsSet("no-mount") {
		cfg.NoMount = c.Bool("no-mount")
	}
	cfg.Recover = c.Bool("recover")
	// Absolute, so that what the daemon reports (ox-status) means the same
	// to a client in another folder, and the socket it hands its runs
	// (OXIOS_SOCKET) reaches it from their workspace: `oxiosd --socket
	// s.sock` served, but every run's tools answered "oxiosd unreachable:
	// s.sock" (issue 47).
	for _, p := range []*string{&cfg.Data, &cfg.Mount, &cfg.Socket} {
		*p = absPath(*p)
	}
	if _, err := config.ParseLevel(cfg.LogLevel); err != nil {
		if !c.IsSet("log-level") {
			return cfg, configErr(fmt.Errorf("%s: log_level %q: want debug, info, warn or error", cfg.File, cfg.LogLevel))
		}
		return cfg, cliutil.Usagef("--log-level %q: want debug, info, warn or error", cfg.LogLevel)
	}
	for name, p := range map[string]string{"--data": cfg.Data, "--socket": cfg.Socket, "--mount": cfg.Mount} {
		if p == "" {
			return cfg, cliutil.Usagef("%s must not be empty", name)
		}
	}
	return cfg, nil
}

// absPath returns p made absolute; "" (none) stays "".
func absPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// cpuProfile writes a CPU profile of the daemon's run, from its start to
// its stop, to path (OXIOS_CPUPROFILE), for go tool pprof: where a start,
// a stop or a slow operation spends its time, on the operator's own data.
func cpuProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("OXIOS_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("OXIOS_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// underJournal reports whether standard error is journald's stream:
// JOURNAL_STREAM names its device and inode (systemd.exec(5)); a program
// it started with stderr sent elsewhere has the variable but not the file.
func underJournal() bool {
	dev, ino, ok := strings.Cut(os.Getenv("JOURNAL_STREAM"), ":")
	if !ok {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(2, &st); err != nil {
		return false
	}
	return strconv.FormatUint(uint64(st.Dev), 10) == dev && strconv.FormatUint(st.Ino, 10) == ino
}

func run(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("unexpected argument %q", c.Args().First())
	}
	if p := os.Getenv("OXIOS_CPUPROFILE"); p != "" {
		stop, err := cpuProfile(p)
		if err != nil {
			return err
		}
		defer stop()
	}
	kernel.Version = version
	cfg, err := settings(c)
	if err != nil {
		return err
	}
	level, _ := config.ParseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if underJournal() {
		// journald stamps every line itself: a second time is noise.
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, opts))
	slog.SetDefault(log)

	gid := -1
	if cfg.SocketGroup != "" {
		if gid, err = config.LookupGID(cfg.SocketGroup); err != nil {
			return configErr(fmt.Errorf("socket_group: %v", err))
		}
	}
	// Claim the socket before touching the data: a second daemon must not
	// open (and replay) the journal of the first.
	ln, activated, err := server.Listener(cfg.Socket, gid)
	if err != nil {
		return cliutil.Failf("%v", err)
	}
	k, err := kernel.New(cfg, log)
	if err != nil {
		ln.Close()
		if errors.Is(err, kernel.ErrDamaged) {
			return &cliutil.ExitError{Code: cliutil.ExitDamaged, Err: err}
		}
		return cliutil.Failf("%v", err)
	}
	// The root context: cancelled on SIGTERM or SIGINT, it reaches every
	// subsystem that works in the background (the watchers, the server's
	// followers), which stop with it.
	root, cancelRoot := context.WithCancel(context.Background())
	defer cancelRoot()
	k.Bind(root)
	fl, err := joinFleet(root, cfg, k, log)
	if err != nil {
		ln.Close()
		k.Close()
		return cliutil.Failf("%v", err)
	}
	srv := server.New(root, k, log)
	k.SetRunListener(srv.ListenRun)
	// Signals are caught before READY=1: a SIGHUP sent by a supervisor
	// (or a test) right after it must reload, not kill the daemon with
	// the signal's default action.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	mnt := mount(cfg, k, log)
	// The policy files the admin left while oxiosd was down are in force
	// before it says it is ready.
	k.ApplyPolicies(root)
	if err := k.StartScheduler(nil); err != nil {
		log.Error("scheduler not started", "err", err)
	}
	// The socket serves once every subsystem is ready: a client that
	// connected meanwhile waits in the listen backlog for its hello,
	// rather than be told ESHUTDOWN by the scheduler not yet started
	// (issue 45). A job's run that the start fires (a catch-up) and that
	// calls the daemon waits the same way.
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("oxiosd ready", "version", version, "socket", cfg.Socket, "activated", activated, "data", cfg.Data, "config", cfg.File)
	daemon.SdNotify(false, daemon.SdNotifyReady)

	// The config file and the policies folder are watched: an edit is
	// applied, or refused with a log line.
	load := func() (config.Config, error) { return settings(c) }
	go func() {
		if err := k.Watch(root, load); err != nil {
			log.Warn("config and policies are not watched", "err", err)
		}
	}()

	var watchdog <-chan time.Time
	iv, err := daemon.SdWatchdogEnabled(false)
	if err == nil && iv > 0 {
		t := time.NewTicker(iv / 2)
		defer t.Stop()
		watchdog = t.C
	}

	var exitErr error
loop:
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGHUP {
				log.Info("SIGHUP: reloading the config and the policy files")
				k.ReloadNow(root, load)
				continue
			}
			log.Info("shutting down", "signal", s.String())
			break loop
		case <-c.Context.Done():
			// cliutil.Run catches SIGTERM and SIGINT from the start: one
			// that came while oxiosd started, before sigs was set up,
			// cancelled this context and would otherwise be lost (the
			// daemon went on running, deaf to the stop it was sent).
			log.Info("shutting down", "signal", "received while starting")
			break loop
		case err := <-serveErr:
			if err != nil {
				exitErr = cliutil.Failf("serving: %v", err)
			}
			break loop
		case err := <-k.Fatal():
			log.Error("storage failed; exiting so that a restart recovers from the journal", "err", err)
			exitErr = cliutil.Failf("storage failed: %v", err)
			break loop
		case <-watchdog:
			// Only while changes move: a committer that completes
			// nothing for half the interval while changes wait misses
			// the ping, and one that stays so is restarted.
			if k.Stalled(iv / 2) {
				log.Error("no change committed for half the watchdog interval while changes wait: not pinging the watchdog", "interval", iv)
				continue
			}
			daemon.SdNotify(false, daemon.SdNotifyWatchdog)
		}
	}
	signal.Reset(syscall.SIGTERM, syscall.SIGINT)
	cancelRoot()
	k.StopAsking()
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if mnt != nil {
		// Unmounted before the kernel closes: saves of files closed
		// through the mount are queued to it until the very end.
		if err := mnt.Close(); err != nil {
			log.Warn("unmounting", "mount", mnt.Dir(), "err", err)
		}
	}
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("connections did not finish in time", "err", err)
	}
	if fl != nil {
		fl.Close()
	}
	if err := k.Close(); err != nil {
		log.Error("closing kernel", "err", err)
		if exitErr == nil {
			exitErr = cliutil.Failf("flushing data: %v", err)
		}
	}
	if activated {
		// systemd keeps the socket and its file for the next start.
		ln.Close()
	}
	if exitErr == nil {
		log.Info("stopped")
	}
	return exitErr
}

// joinFleet joins the fleet the config names; alone (no [fleet] servers)
// nothing of it runs.
func joinFleet(ctx context.Context, cfg config.Config, k *kernel.Kernel, log *slog.Logger) (*fleet.Fleet, error) {
	if !cfg.Fleet.On() {
		return nil, nil
	}
	f, err := fleet.Join(ctx, cfg.Fleet, fleet.Options{Kernel: serve.Fleet{Kernel: k}, Data: cfg.Data, Server: "oxiosd/" + version, Log: log})
	if err != nil {
		return nil, err
	}
	k.SetFleet(f)
	log.Info("fleet: joining", "node", f.Name(), "servers", strings.Join(cfg.Fleet.Servers, ","))
	return f, nil
}

// mount mounts the agents' filesystem, or says in one line why not: the
// daemon serves over the socket either way.
func mount(cfg config.Config, k *kernel.Kernel, log *slog.Logger) *fs.Mount {
	if cfg.NoMount {
		log.Info("filesystem mount disabled (--no-mount); serving over the socket only")
		return nil
	}
	if err := fs.Available(); err != nil {
		log.Warn("filesystem mount not available; serving over the socket only", "mount", cfg.Mount, "err", err)
		return nil
	}
	m, err := fs.New(k, fs.Options{
		Dir: cfg.Mount,
		// Other users reach the mount only if the configuration grants
		// some; oxiosd then checks each request.
		// Sandboxed runs reach their agent's folder with uids of their own.
		AllowOther: len(cfg.Access.Admins) > 0 || len(cfg.Access.Users) > 0 || os.Geteuid() == 0,
		Debug:      os.Getenv("OXIOS_FUSE_DEBUG") != "",
		Log:        log,
	})
	if err != nil {
		log.Error("filesystem mount failed; serving over the socket only", "mount", cfg.Mount, "err", err)
		return nil
	}
	log.Info("filesystem mounted", "mount", m.Dir())
	return m
}
