package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/wasm"
)

// benchWasm measures a WASM tool call (jsonq on a small document) end to
// end through the tool.run syscall once the module is compiled, the
// sandbox's own share (wasm.Runner in this process), and the first call's
// compile.
func benchWasm(dir string, n int) {
	tools := filepath.Join(*binDir, "..", "share", "tools")
	if _, err := os.Stat(filepath.Join(tools, "jsonq.wasm")); err != nil {
		// Not beside the binaries (make tools): build it here.
		tools = filepath.Join(dir, "tools")
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(tools, "jsonq.wasm"), "./tools/jsonq")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		cmd.Stderr = os.Stderr
		check(cmd.Run())
		manifest := `{"name":"jsonq","description":"bench","input_schema":{"type":"object"}}`
		check(os.WriteFile(filepath.Join(tools, "jsonq.json"), []byte(manifest), 0o644))
	}
	tools, _ = filepath.Abs(tools)
	wd := filepath.Join(dir, "wasm")
	check(os.MkdirAll(wd, 0o700))
	conf := filepath.Join(wd, "oxios.toml")
	check(os.WriteFile(conf, []byte(fmt.Sprintf("[runs]\ntools = %q\n", tools)), 0o600))
	d := startDaemonConfig(wd, conf)
	defer d.stop()
	c := dial(d.sock)
	defer c.Close()
	ctx := context.Background()
	// A tool call does not create its agent.
	_, err := c.StateSave(ctx, "bench", "created", []byte("by the bench"))
	check(err)
	args := proto.ToolRunArgs{Agent: "bench", Tool: "jsonq", Args: []string{".items[1].name"},
		Input: `{"items":[{"name":"a","n":1},{"name":"b","n":2}]}`}

	t := time.Now()
	first, err := c.ToolRun(ctx, args)
	check(err)
	firstCall := time.Since(t)
	if first.Status != 0 || first.Stdout != "\"b\"\n" {
		fatal(fmt.Errorf("jsonq: status %d, %q %q", first.Status, first.Stdout, first.Stderr))
	}
	calls := make([]time.Duration, n)
	for i := range calls {
		t := time.Now()
		rec, err := c.ToolRun(ctx, args)
		check(err)
		calls[i] = time.Since(t)
		if rec.Compile != 0 {
			fatal(fmt.Errorf("jsonq compiled again on call %d", i))
		}
	}
	// The sandbox alone: the same call on a wasm.Runner in this process.
	r := wasm.New(tools)
	defer r.Close(ctx)
	spec := wasm.Spec{Tool: "jsonq", Args: args.Args, Stdin: []byte(args.Input), Mounts: []wasm.Mount{{Host: wd, Guest: wasm.GuestWork}}}
	_, err = r.Run(ctx, spec)
	check(err)
	bare := make([]time.Duration, n)
	for i := range bare {
		t := time.Now()
		_, err := r.Run(ctx, spec)
		check(err)
		bare[i] = time.Since(t)
	}
	mb, mc := median(bare), median(calls)
	reportMs("wasm: first jsonq call, compile (in oxiosd)", time.Duration(first.Compile*float64(time.Second)), 0, "(reported)")
	reportMs("wasm: first jsonq call end to end", firstCall, 0, "")
	reportMs("wasm: jsonq call, wasm.Runner alone (median)", mb, 0, "")
	reportMs("wasm: jsonq call via tool.run, cached (median)", mc, mb, "<= 5 ms")
	sort.Slice(calls, func(i, j int) bool { return calls[i] < calls[j] })
	reportMs("wasm: jsonq call via tool.run, cached (p99)", calls[len(calls)*99/100], 0, "")
}
