// Package kernel is the one place where Oxios does anything: each
// syscall is one definition (Def, def.go) in the table of syscalls.go:
// its declaration, how the gate finds the call's agent, key and target
// in its args (Subject), its wire docs and shape, an example call, and
// its work (Do). One dispatcher (Def.Call, Def.Stream, Def.Serve) runs
// every call through the gate (gate.go): validate -> authorize -> policy
// (its rules, an ask, its hook: question.go, hook.go) -> do -> audit
// (refusals too) -> publish; the work never gates (TestOnlyTheDispatcherGates),
// and the kernel's exported method of a syscall is a one-line call of its
// definition. Adding a syscall is its Def, with its Do, in the table;
// pkg/serve serves it from the wire, and the guard tests call it from its
// example. The dry run (ox-policy check and test) is the gate with the
// work skipped, for any caller (Verdict), asking the question the
// definition declares. The socket server, the fleet and
// the FUSE view call these syscalls and nothing below them; the
// subsystems (access with its credentials, grants and what a caller
// lists and sees, groupcommit's queue, state, agenttree with an agent's
// creation, removal and forks (Forker), audit with its reads, targets, shown lines and
// heads, version with its commits, tags, restores and their plans,
// diffs, forks and pushes (Work), uncommitted, memory, memindex with its
// expiries and the entries of a remember and a forget, recall, expiry,
// budget with its audited changes, inbox with its deliveries, approval
// with its listings and its desk, bus with its event records and
// streams, netfetch, llm's breakers, the supervisor with its cgroups,
// runq with its waits, attaches and the audit entries of a run's life,
// runspec with the sandbox's host, an exec's and a tool call's run,
// admit, sched/jobs, policy with its violations and message rules and
// policy/judge, writeback's flights, reload with a refused config and a
// changed policy file, status's record...) are packages of their own
// that do not know about each other: the kernel passes what they need,
// and those that record their own audit entries do it through the
// group commit (an audit.Recorder, a memindex.Group, a budget.Queue...).
//
// Changes are group-committed: a mutating syscall queues a transaction;
// one committer at a time (the caller itself when nobody else commits,
// else the committer goroutine: see pkg/groupcommit) takes every
// transaction queued at that moment, writes the state changes and their
// audit entries to the state journal, makes it durable with one
// fdatasync (the audit log's own file is synced at checkpoints: until
// then the journal holds its entries), and only then makes the batch
// visible, replies, and tells the event bus. A reply of ok therefore
// means the change and its audit entry are on disk. There is no wait
// window: a batch is whatever queued while the last one was syncing,
// which keeps one client fast and many clients efficient.
package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/access"
	"github.com/oxios/oxios/pkg/approval"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/embed"
	"github.com/oxios/oxios/pkg/expiry"
	"github.com/oxios/oxios/pkg/groupcommit"
	"github.com/oxios/oxios/pkg/inbox"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/memindex"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/reload"
	"github.com/oxios/oxios/pkg/runq"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/supervisor"
	"github.com/oxios/oxios/pkg/wasm"
	"github.com/oxios/oxios/pkg/work"
	"github.com/oxios/oxios/pkg/writeback"
)

// Version is the daemon's version, set by the linker in cmd/oxiosd.
var Version = "0.1.0-dev"

// Cred is who is calling (see pkg/access).
type Cred = access.Cred

// RunResolver maps a peer to the agent run it belongs to (see pkg/access).
type RunResolver = access.RunResolver

// Kernel holds the subsystems and runs the committer.
type Kernel struct {
	cfg config.Config
	log *slog.Logger
	// root is the context of the kernel's background work (the run
	// queue, the scheduler's runs): cancelled by Close, or before it by
	// the context Bind gave (oxiosd's, on SIGTERM).
	root     context.Context
	stopRoot context.CancelFunc
	state    *state.Store
	audit    *audit.Log
	bus      *bus.Bus
	ver      *versioning
	runs     RunResolver
	fleet    Fleet           // nil alone (fleet.go)
	owing    owed            // the charges owed to agents' homes being sent (home.go)
	gated    func(op string) // a test's count of the calls the gate sees (OnGate)
	uid      uint32
	breakers llm.Breakers // the model endpoints' (llmhealth.go)
	// llmClients and prompts are llm.chat's (llmchat.go).
	llmClients llmClients
	prompts    promptMemo

	// auditSeq is the seq of the last entry appended to the audit log; only
	// the committer (and recovery before it starts) touches it.
	auditSeq uint64
	// replay is what the journal held of the audit log (recover.go).
	replay replayed

	// txq is the queue of the group commit (see commit.go).
	txq   *groupcommit.Queue[*tx]
	fatal chan error // the storage can no longer be trusted: restart
	// refusals coalesces floods of refusals into counted entries.
	refusals *audit.Coalescer

	flights writeback.Flights // the mount's saves queued and not durable yet
	// Memory: a recall index per agent (memory.go).
	mem *memindex.Set
	ttl *expiry.Timer // the memories' TTLs (memory.go)
	emb *embed.Signal // nil: no endpoint
	// Runs (run.go, exec.go, budget.go).
	sup     *supervisor.Supervisor
	works   work.Store // runs' pending work on host folders (work.go)
	workMu  sync.Mutex // one apply or discard at a time
	budgets *budget.Ledger
	pol     policy.Cache
	live    reload.Live
	tools   wasm.Lazy   // WASM tools (tool.go)
	adm     *runq.Queue // the run queue (admit.go)
	started time.Time
	sched   *jobs.Table    // schedules (schedule.go)
	box     runspec.Host   // the sandbox of runs and execs (sandbox.go)
	inbox   *inbox.Store   // the agents' inboxes (msg.go)
	asks    *approval.Desk // approvals (approve.go)
}

// New opens the data directory and starts the committer.
func New(cfg config.Config, log *slog.Logger) (*Kernel, error) {
	if err := durable.Private(cfg.Data); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// Compiled tools run inside the daemon: a cache folder the config
	// names and others may write is refused at the start, not found out
	// at the first call. The default one, DATA/cache/tools, is checked
	// then: a data folder under a folder others may write (which started
	// before there was a cache) compiles in memory, with a warning.
	if cfg.Runs.ToolsCache != "" {
		if err := wasm.CheckCache(cfg.Runs.ToolsCache); err != nil {
			return nil, fmt.Errorf("runs.tools_cache: %w", err)
		}
	}
	alog, err := audit.Open(filepath.Join(cfg.Data, "audit"), audit.Options{})
	if errors.Is(err, audit.ErrTampered) {
		return nil, damaged{fmt.Errorf("audit log: %w", err)}
	} else if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if alog.Recovered != "" {
		log.Warn("audit log recovered after a crash", "what", alog.Recovered)
	}
	k := &Kernel{
		cfg:   cfg,
		log:   log,
		audit: alog,
		bus:   bus.New(),
		uid:   uint32(os.Getuid()),
		fatal: make(chan error, 1),
	}
	k.openCommitter()
	k.budgets = budget.NewLedger(func(agent string) ([]byte, error) {
		v, _, err := k.state.Load(state.Ref(state.SpaceSys, agent), sysBudget)
		return v, err
	}, log)
	k.budgets.Queue = k.queueBudget
	k.pol.Load = func(agent string) (*policy.Policy, error) {
		p, _, err := k.loadPolicy(agent)
		return p, err
	}
	k.root, k.stopRoot = context.WithCancel(context.Background())
	k.refusals = audit.NewCoalescer(func(e *audit.Entry) { k.submit(k.record(), &tx{entry: e}, false) })
	k.ttl = expiry.New(k.expire)
	k.openScheduler()
	k.emb = embed.NewSignal(cfg.Memory.EmbeddingsURL, cfg.Memory.EmbeddingsModel, cfg.Memory.EmbeddingsKeyEnv, log)
	k.auditSeq, _ = alog.Head()
	replayed := k.auditSeq
	// Versioning first: replaying the journal marks uncommitted paths.
	// The saved recall indexes decode while the store opens.
	k.mem = memindex.OpenSet(filepath.Join(cfg.Data, "index", "recall"), log)
	if err := k.openVersioning(); err != nil {
		alog.Close()
		return nil, err
	}
	st, err := state.Open(cfg.Data, state.Options{
		MaxValue:  int(cfg.Limits.MaxValue),
		ReplayAux: k.replayAux,
		// A memory costs about 700 journal bytes (its file and its audit
		// entry) and a file creation behind the journal, which is the slow
		// part on most file systems (~100 us here). A checkpoint waits for
		// every file: at the default 64 MiB a burst of 100k memories hit
		// one and ran at the file creation rate (8.4k/s instead of 20k+).
		CheckpointBytes: 160 << 20,
		DiskReserve:     int64(cfg.Limits.DiskReserve),
		Recover:         cfg.Recover,
		AfterReplay:     k.checkRecovered,
		BeforeCheckpoint: func() error {
			// The commits published from the journal (forks) are
			// written before it is emptied.
			if err := k.ver.repo.Flush(); err != nil {
				return err
			}
			if err := alog.Sync(); err != nil {
				return err
			}
			if err := k.writeMark(); err != nil {
				return err
			}
			return k.ver.paths.Save()
		},
	})
	if err != nil {
		k.ver.repo.Close()
		alog.Close()
		return nil, openError(err)
	}
	if n := k.auditSeq - replayed; n > 0 {
		log.Info("audit entries restored from the journal", "entries", n, "head", k.auditSeq)
	}
	k.state = st
	// What is open so far closes again when a later step fails.
	for _, open := range []func() error{k.checkRepoAtStart, k.loadIndexes, k.openTalk, k.openSupervisor} {
		if err := open(); err != nil {
			st.Close()
			k.ver.repo.Close()
			alog.Close()
			return nil, err
		}
	}
	k.openAdmission(k.root)
	k.started = time.Now().UTC()
	k.txq.Start()
	for _, r := range [][3]string{{opJournalRecover, "journal", k.replay.recovered}, {opRepoRecover, "repo", k.replay.repo}} {
		if r[2] == "" {
			continue
		}
		if err := k.auditRecovery(r[0], r[1], r[2]); err != nil {
			k.Close()
			return nil, fmt.Errorf("recording the recovery in the audit log: %w", err)
		}
	}
	k.asks.ResolveLeft(k.daemonActor())
	for _, finish := range []func() error{k.finishRemovals, k.finishForgets} {
		if err := finish(); err != nil {
			k.Close()
			return nil, err
		}
	}
	return k, nil
}

// Stalled reports whether changes wait for the committer and none was
// committed for d (groupcommit.Queue.Stalled): the daemon's watchdog
// stops pinging then, so that systemd restarts a daemon whose writes
// all hang.
func (k *Kernel) Stalled(d time.Duration) bool { return k.txq.Stalled(d) }

// Fatal delivers an error when the kernel can no longer commit (a failed
// fdatasync leaves the page cache in an unknown state): the daemon should
// exit non-zero so that a restart recovers from the journal.
func (k *Kernel) Fatal() <-chan error { return k.fatal }

// SetRunResolver installs the supervisor's pid lookup.
func (k *Kernel) SetRunResolver(r RunResolver) { k.runs = r }

// record is the context of an audit entry the kernel makes for no
// caller (a run's end, a refusal): made even while the daemon stops, so
// not cancelled with the root.
func (k *Kernel) record() context.Context { return context.WithoutCancel(k.root) }

// Bind ties the kernel's background work to ctx (the daemon's root
// context): once ctx is done, queued runs no longer start and work
// started for no caller stops, while Close still records the end of
// what ran.
func (k *Kernel) Bind(ctx context.Context) {
	context.AfterFunc(ctx, k.stopRoot)
}

// Close finishes queued transactions and closes the subsystems. Callers
// stop issuing syscalls first (the server drains its connections).
func (k *Kernel) Close() error {
	k.stopRoot()
	// No new firing; then the runs: their ends are audited, through the
	// committer; queued runs never start.
	k.stopScheduler()
	k.adm.Close()
	k.sup.Close()
	k.closeTools()
	k.refusals.Flush()
	if !k.txq.Shut() {
		return nil
	}
	k.ttl.Stop()
	k.txq.Stop()
	k.mem.SaveAll()
	k.closeTalk()
	err := k.state.Close()
	if verr := k.ver.repo.Close(); err == nil {
		err = verr
	}
	if aerr := k.audit.Close(); err == nil {
		err = aerr
	}
	return err
}

// Config returns the configuration the kernel runs with.
func (k *Kernel) Config() config.Config { return k.cfg }

// Identify turns peer credentials into a Cred, or refuses the peer
// (audited).
func (k *Kernel) Identify(uid, gid uint32, pid int32) (*Cred, error) {
	c, refused, err := access.Identify(uid, gid, pid, k.uid, k.runs, &k.liveCfg().Access)
	if err != nil {
		k.auditDenied(c, "connect", refused, nil, proto.EACCES)
		return nil, err
	}
	return c, nil
}

// HelloCall is the hello op: the hello again, once the gate let it
// through, to a client that speaks protocol a.Proto (0: any).
func (k *Kernel) HelloCall(ctx context.Context, c *Cred, a proto.HelloArgs, raw []byte) (proto.Hello, error) {
	return sysHello.Call(k, ctx, c, a, raw)
}

func (k *Kernel) helloCall(_ context.Context, c *Cred, a proto.HelloArgs, _ []byte) (proto.Hello, error) {
	if a.Proto != 0 && a.Proto != proto.Version {
		return proto.Hello{}, proto.Errorf(proto.EPROTO, "client speaks protocol %d, oxiosd speaks %d", a.Proto, proto.Version)
	}
	return k.Hello(c), nil
}

// Hello is the greeting the server sends on a new connection.
func (k *Kernel) Hello(c *Cred) proto.Hello {
	return proto.Hello{
		Proto: proto.Version, Server: "oxiosd/" + Version, MaxLine: int(k.cfg.Limits.MaxLine),
		MaxValue: int(k.cfg.Limits.MaxValue),
		UID:      c.UID, PID: c.PID, Admin: c.Admin, Agent: c.Agent,
	}
}

// auditDenied records a refusal. Refusals are committed like changes so
// the log holds every denial, but the caller does not wait for them.
func (k *Kernel) auditDenied(c *Cred, op, target string, args []byte, code string) {
	e := &audit.Entry{Actor: c.Actor(), Op: op, Target: target, Args: audit.ArgsDigest(args), Result: code}
	if !k.refusals.Admit(e) {
		return // counted for a summary entry
	}
	k.submit(k.record(), &tx{entry: e}, false)
}

// Refused audits a request refused before its syscall ran: args that do
// not decode (the server), an operation the mount does not offer, such as
// symlink(2) or link(2) (package fs).
func (k *Kernel) Refused(c *Cred, op, target string, raw []byte, code string) {
	k.auditDenied(c, op, strings.ToValidUTF8(target, "?"), raw, code)
}
