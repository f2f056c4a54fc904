package cliutil

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// FleetStream runs op with args on every node of the daemon's fleet and
// calls fn with each record (each has its "node"). A node that failed is
// named on stderr and makes the command fail once the others are done.
func FleetStream(ctx context.Context, cl *client.Client, op string, args any, fn func(rec json.RawMessage) error) error {
	var failed []string
	_, err := cl.FleetCall(ctx, proto.FleetAll, op, args, func(rec json.RawMessage) error {
		var e struct {
			Type, Node, Code, Message string
		}
		if json.Unmarshal(rec, &e) == nil && e.Type == "error" && e.Code != "" {
			fmt.Fprintf(os.Stderr, "%s: node %s: %s: %s\n", progName(), e.Node, e.Code, e.Message)
			failed = append(failed, e.Node)
			return nil
		}
		return fn(rec)
	})
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return Failf("%d nodes did not answer: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

func progName() string {
	if len(os.Args) == 0 {
		return "ox"
	}
	n := os.Args[0]
	if i := strings.LastIndexByte(n, '/'); i >= 0 {
		n = n[i+1:]
	}
	return n
}
