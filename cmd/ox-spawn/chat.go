package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

// chatter hands the messages of a chat (ox-spawn -i) to its run: each is
// read from stdin (agent.TurnReader: a line, or several between !multi
// and !end) and written to the run's stdin (run.stdin) as a message
// record; the end of stdin, or exit, closes it, and the run ends once it
// has answered. On a terminal, each message is asked for when the run
// waits for it (its turn record), after a prompt; off one, the lines go
// to the run as they come once it waits for the first, and it answers
// them in order.
type chatter struct {
	cl    *client.Client
	tty   bool
	turns *agent.TurnReader
	// turn is told of each turn record; started of the run's id.
	turn    chan struct{}
	started chan string
}

func newChatter(cl *client.Client) *chatter {
	h := &chatter{cl: cl, tty: cliutil.IsTerminal(os.Stdin), turns: agent.NewTurnReader(os.Stdin),
		turn: make(chan struct{}, 1), started: make(chan string, 1)}
	if h.tty {
		h.turns.Prompt = func(more bool) {
			if more {
				fmt.Fprint(os.Stderr, "... ")
			} else {
				fmt.Fprint(os.Stderr, "> ")
			}
		}
	}
	return h
}

// record looks at a record of the run: its first tells the run's id, a
// turn record that the run waits for a message.
func (h *chatter) record(run string, rec json.RawMessage) {
	if run != "" {
		select {
		case h.started <- run:
		default:
		}
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(rec, &head) == nil && head.Type == proto.RecordTurn {
		select {
		case h.turn <- struct{}{}:
		default:
		}
	}
}

// feed writes the messages to the run until stdin ends, then closes the
// run's stdin. It gives up, quietly, once the run is gone: its exit
// record says why.
func (h *chatter) feed(ctx context.Context) {
	var run string
	select {
	case run = <-h.started:
	case <-ctx.Done():
		return
	}
	for first := true; ; first = false {
		// The first message waits for the run to wait for it (a run may
		// be queued, its stdin not there yet); on a terminal, each does.
		if h.tty || first {
			select {
			case <-h.turn:
			case <-ctx.Done():
				return
			}
		}
		text, err := h.turns.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "ox-spawn: stdin: %v; ending the chat\n", err)
			}
			if h.tty {
				fmt.Fprintln(os.Stderr)
			}
			h.cl.Stdin(ctx, run, nil, true)
			return
		}
		if _, err := h.cl.Stdin(ctx, run, agent.MessageLine(text), false); err != nil {
			return
		}
	}
}
