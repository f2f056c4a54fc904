// Command oxios-toolcache compiles WASM tools into a cache of compiled
// tools (runs.tools_cache), as oxiosd's first call of each would, for the
// integration tests (tests/integration/wasm_test.go): built without the
// race detector, it compiles a tool in a second or two, where a race-built
// oxiosd takes about 12 s of CPU a tool, which each test would otherwise
// spend again (its subject is the call, not the compile).
//
// Usage: oxios-toolcache TOOLS CACHE NAME...
//
// Each NAME is called once, with no arguments and no input, from the
// folder TOOLS (NAME.wasm); what the tool does then is not looked at, only
// that its module compiled.
package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/oxios/oxios/pkg/wasm"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: oxios-toolcache TOOLS CACHE NAME...")
		os.Exit(2)
	}
	ctx := context.Background()
	r := wasm.NewCached(os.Args[1], os.Args[2])
	code := 0
	for _, name := range os.Args[3:] {
		if _, err := r.Run(ctx, wasm.Spec{Tool: name, Timeout: 10 * time.Second}); err != nil {
			fmt.Fprintf(os.Stderr, "oxios-toolcache: %v\n", err)
			code = 1
		}
	}
	if err := r.Close(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "oxios-toolcache: %v\n", err)
		code = 1
	}
	// A folder the runner could not use was logged, and it compiled in
	// memory instead: nothing was kept.
	files := 0
	filepath.WalkDir(os.Args[2], func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
		}
		return nil
	})
	if files == 0 {
		fmt.Fprintf(os.Stderr, "oxios-toolcache: nothing compiled into %s\n", os.Args[2])
		code = 1
	}
	os.Exit(code)
}
