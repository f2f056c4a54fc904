package vfs

import (
	"bytes"
	"context"
	"strings"
	"unicode/utf8"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// Runs as files, Plan 9 style:
//
//	/agent/NAME/spawn          write a command line: it starts a run of NAME
//	                           (run.spawn), its stdin kept open; a read of
//	                           the same open file gives the new run's id
//	/agent/NAME/runs/          one folder per run of NAME (run.ps --all)
//	/agent/NAME/runs/RUN/status  the run's record, JSON (run.ps)
//	/agent/NAME/runs/RUN/out     its records (run.attach): a read waits for
//	                           the next one, and is end of file once the
//	                           run has ended (cat follows it; so does tail -f)
//	/agent/NAME/runs/RUN/ctl     write a signal's name (stop, cont, term,
//	                           kill, hup, int, or a number): run.kill;
//	                           or eof: the end of its stdin
//
// Each is the syscall of the matching ox-* command (ox-spawn, ox-ps,
// ox-attach, ox-kill), made by the caller.
//
//	/agent/NAME/runs/RUN/stdin   a run started through spawn: what is
//	                           written is its input (run.stdin); eof
//	                           written to ctl closes it
//
// A run on a host folder (ox-spawn --work) has two more: work.diff and
// the folder work/ (work.go).

// Spawn is /agent/NAME/spawn.
var Spawn = &Kind{
	Name: "spawn",
	Mode: 0o600,
	Write: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, b []byte) ([]byte, error) {
		argv, err := Words(string(b))
		if err != nil {
			return nil, err
		}
		if len(argv) == 0 {
			return nil, proto.Errorf(proto.EINVAL, "spawn: no command (write a command line, as to a shell)")
		}
		a := proto.SpawnArgs{Agent: n.Agent, Command: argv, OpenStdin: true}
		rec, err := k.RunSpawn(ctx, c, a, raw(a))
		if err != nil {
			return nil, err
		}
		return []byte(rec.ID + "\n"), nil
	},
}

// RunFiles are the rows of a run's folder.
var RunFiles = []*Kind{
	{
		Name: "status",
		Mode: 0o444,
		Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
			rec, err := findRun(ctx, k, c, n.Agent, n.ID)
			if err != nil {
				return nil, err
			}
			return jsonLine(rec)
		},
	},
	{
		Name: "out",
		Mode: 0o444,
		Follow: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, emit func([]byte) error) error {
			return k.RunAttach(ctx, c, n.ID, raw(proto.AttachArgs{Run: n.ID}), func(rec []byte) error {
				if !bytes.HasSuffix(rec, []byte("\n")) {
					rec = append(rec[:len(rec):len(rec)], '\n')
				}
				return emit(rec)
			})
		},
	},
	{
		Name: "ctl",
		Mode: 0o200,
		Write: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, b []byte) ([]byte, error) {
			cmds := strings.Fields(string(b))
			if len(cmds) == 0 {
				return nil, proto.Errorf(proto.EINVAL, "ctl: no signal (write stop, cont, term, kill, or a number)")
			}
			for _, sig := range cmds {
				if sig == "eof" {
					// Not a signal: the end of the run's input.
					a := proto.StdinArgs{Run: n.ID, Close: true}
					if _, err := k.RunStdin(ctx, c, a, raw(a)); err != nil {
						return nil, err
					}
					continue
				}
				a := proto.KillArgs{Runs: []string{n.ID}, Signal: sig}
				if err := k.RunKill(ctx, c, a, raw(a), func(*proto.RunRecord) error { return nil }); err != nil {
					return nil, err
				}
			}
			return nil, nil
		},
	},
}

// Stdin is a run's stdin, for a run started with it open (through
// Spawn): each write(2) is written to the run's stdin, in order (a write
// the run does not read waits for it). Closing the file does not close
// the run's stdin, so that echo after echo reaches one run: eof written
// to ctl does (run.stdin with close).
var Stdin = &Kind{
	Name: "stdin",
	Mode: 0o200,
	Write: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, b []byte) ([]byte, error) {
		a := proto.StdinArgs{Run: n.ID, Data: b}
		_, err := k.RunStdin(ctx, c, a, raw(a))
		return nil, err
	},
}

// Runs is the folder of agent's runs.
func (l *Layer) Runs(agent string) Dir { return &runsDir{agent: agent, k: l.k} }

// Spawn is the spawn file of agent.
func (l *Layer) Spawn(agent string) *Node { return &Node{Kind: Spawn, Agent: agent} }

type runsDir struct {
	agent string
	k     Kernel
}

// runs lists the runs of agent c may see, live, queued and kept.
func runs(ctx context.Context, k Kernel, c *kernel.Cred, agent string) ([]proto.RunRecord, error) {
	var recs []proto.RunRecord
	a := proto.PsArgs{Agent: agent, All: true}
	err := k.RunPs(ctx, c, a, raw(a), func(r *proto.RunRecord) error {
		if r.Agent == agent && r.Node == "" {
			recs = append(recs, *r)
		}
		return nil
	})
	return recs, err
}

func findRun(ctx context.Context, k Kernel, c *kernel.Cred, agent, id string) (proto.RunRecord, error) {
	recs, err := runs(ctx, k, c, agent)
	if err != nil {
		return proto.RunRecord{}, err
	}
	for _, r := range recs {
		if r.ID == id {
			return r, nil
		}
	}
	return proto.RunRecord{}, proto.Errorf(proto.ENOENT, "no run %s of %s", id, agent)
}

func (d *runsDir) Entries(ctx context.Context, c *kernel.Cred) ([]Entry, error) {
	recs, err := runs(ctx, d.k, c, d.agent)
	if err != nil {
		return nil, err
	}
	es := make([]Entry, 0, len(recs))
	for _, r := range recs {
		es = append(es, Entry{Name: r.ID, Dir: d.run(&r)})
	}
	return es, nil
}

func (d *runsDir) Lookup(ctx context.Context, c *kernel.Cred, name string) (Entry, error) {
	r, err := findRun(ctx, d.k, c, d.agent, name)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Name: name, Dir: d.run(&r)}, nil
}

// run is the folder of run r: RunFiles, its stdin when it is open, and,
// on a host folder, its work.
func (d *runsDir) run(r *proto.RunRecord) Dir {
	t := &table{rows: RunFiles, agent: d.agent, run: r.ID}
	if r.OpenStdin {
		t.rows = append(t.rows[:len(t.rows):len(t.rows)], Stdin)
	}
	if r.Work != "" {
		t.rows = append(t.rows[:len(t.rows):len(t.rows)], WorkDiff)
		t.dirs = map[string]Dir{"work": &workDir{k: d.k, agent: d.agent, run: r.ID}}
	}
	return t
}

// Words splits a command line as a shell would, without expanding
// anything: words are separated by blanks; single quotes keep everything
// up to the next one; double quotes keep everything but a backslash
// before ", \ or $; a backslash outside quotes keeps the next character.
// A trailing newline (echo's) is a blank.
func Words(s string) ([]string, error) {
	if !utf8.ValidString(s) {
		return nil, proto.Errorf(proto.EINVAL, "command line is not UTF-8")
	}
	var words []string
	var w strings.Builder
	in := false // a word has begun (even an empty one: '')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, proto.Errorf(proto.EINVAL, "command line: unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, proto.Errorf(proto.EINVAL, "command line: unterminated \"")
			}
			in = true
		case ch == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					w.WriteByte(s[i])
					in = true
				}
			}
		default:
			w.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}
