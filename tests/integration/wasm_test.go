package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// wasmBuild holds the WASM tools built once for these tests: jsonq and
// textstat from tools/, hostile from pkg/wasm/testdata (a tool that
// misbehaves on demand).
var wasmBuild struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// wasmBuilt are the modules wasmTools builds.
var wasmBuilt = []string{"jsonq", "textstat", "hostile"}

// wasmTools builds the tools into a temp folder with their manifests, and
// returns a tools folder holding names (each NAME, or NAME=BUILT to put the
// module BUILT under the name NAME).
func wasmTools(t *testing.T, names ...string) string {
	t.Helper()
	wasmBuild.once.Do(func() {
		// Under binDir, which TestMain removes.
		dir := filepath.Join(binDir, "wasm")
		wasmBuild.dir = dir
		cmd := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "../../tools/jsonq", "../../tools/textstat", "../../pkg/wasm/testdata/hostile")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if wasmBuild.out, wasmBuild.err = cmd.CombinedOutput(); wasmBuild.err != nil {
			return
		}
		// Compiled into the daemons' shared cache (toolsConfig) by a
		// program built without the race detector, in a second or two a
		// tool: a race-built oxiosd takes about 12 s of CPU to compile
		// one, and the tests that start at once would each compile it.
		cmd = exec.Command("go", "build", "-o", bin("oxios-toolcache"), "../toolcache")
		if wasmBuild.out, wasmBuild.err = cmd.CombinedOutput(); wasmBuild.err != nil {
			return
		}
		for _, n := range wasmBuilt {
			if wasmBuild.err = os.Symlink(n, filepath.Join(dir, n+".wasm")); wasmBuild.err != nil {
				return
			}
		}
		cmd = exec.Command(bin("oxios-toolcache"), append([]string{dir, toolCache()}, wasmBuilt...)...)
		wasmBuild.out, wasmBuild.err = cmd.CombinedOutput()
	})
	if wasmBuild.err != nil {
		t.Fatalf("building the WASM tools: %v\n%s", wasmBuild.err, wasmBuild.out)
	}
	dir := shortTempDir(t)
	for _, n := range names {
		name, built, ok := strings.Cut(n, "=")
		if !ok {
			built = name
		}
		b, err := os.ReadFile(filepath.Join(wasmBuild.dir, built))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		manifest, err := os.ReadFile(filepath.Join("..", "..", "share", "tools", name+".json"))
		if err != nil {
			manifest = []byte(`{"name":"` + name + `","description":"a test tool","input_schema":{"type":"object"}}`)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), manifest, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// toolsConfig is the config of a daemon running the tools in dir. The
// daemons of the tests share one cache of compiled tools (under binDir,
// which TestMain removes), which wasmTools fills first.
func toolsConfig(dir string) string {
	return "[runs]\ntools = \"" + dir + "\"\ntools_cache = \"" + toolCache() + "\"\n"
}

// toolCache is the tests' shared cache of compiled tools.
func toolCache() string { return filepath.Join(binDir, "toolcache") }

// TestToolsCacheRefused: oxiosd does not start on a cache of compiled
// tools that others may write (their code would run inside it), and says
// which folder and why; the default one is made 0700.
func TestToolsCacheRefused(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "oxios.toml")
	if err := os.WriteFile(cfg, []byte("[runs]\ntools_cache = \""+filepath.Join(open, "cache")+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A daemon that starts anyway is killed after a while, and fails this.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin("oxiosd"), "--config", cfg, "--data", filepath.Join(dir, "data"), "--socket", filepath.Join(dir, "s"), "--no-mount")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "runs.tools_cache") || !strings.Contains(string(out), open+": mode 0777") {
		t.Fatalf("oxiosd with a world-writable folder above its tools cache: %v\n%s", err, out)
	}
	// The default, DATA/cache/tools, is made private at the first call
	// (one of a tool missing from the folder: nothing to compile, which
	// TestCompileCacheOnDisk of pkg/wasm covers).
	tools := wasmTools(t, "textstat")
	d := startDaemon(t, daemonOpts{config: "[runs]\ntools = \"" + tools + "\"\n"})
	createAgent(t, d, "ops")
	if r := d.ox(`{"a":1}`, "ox-exec", "-a", "ops", "--wasm", "jsonq", ".a"); r.code == 0 || !strings.Contains(r.stderr, "jsonq") {
		t.Fatalf("jsonq, absent: %d %q %s", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(filepath.Join(d.data, "cache", "tools"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("DATA/cache/tools after a call: %v %v", fi, err)
	}
}

func TestWasmTools(t *testing.T) {
	t.Parallel()
	dir := wasmTools(t, "jsonq", "textstat", "hostile")
	d := startDaemon(t, daemonOpts{config: toolsConfig(dir)})
	createAgent(t, d, "ops") // a tool call does not create one

	doc := `{"items":[{"name":"a","n":1},{"name":"b","n":2}],"a":{"b":"c"}}`
	r := d.ox(doc, "ox-exec", "-a", "ops", "--wasm", "jsonq", ".items[0].name")
	if r.code != 0 || r.stdout != "\"a\"\n" {
		t.Fatalf("jsonq .items[0].name: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := d.ox(doc, "ox-exec", "-a", "ops", "--wasm", "jsonq", "--", "-r", ".items[].name"); r.code != 0 || r.stdout != "a\nb\n" {
		t.Fatalf("jsonq -r .items[].name: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := d.ox(doc, "ox-exec", "-a", "ops", "--wasm", "jsonq", ".nope"); r.code != 1 || !strings.Contains(r.stderr, "no key") {
		t.Fatalf("jsonq .nope: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = d.ox("The cat sat.\nThe dog ran.\n", "ox-exec", "-a", "ops", "--json", "--wasm", "textstat")
	var rec proto.ToolRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || r.code != 0 || rec.Type != "tool" || rec.Tool != "textstat" || rec.Status != 0 || len(rec.Digest) != 64 {
		t.Fatalf("textstat --json: %d %v %s %s", r.code, err, r.stdout, r.stderr)
	}
	var st struct {
		Lines, Words, Sentences int
		TopWords                []struct {
			Word  string
			Count int
		} `json:"top_words"`
	}
	if err := json.Unmarshal([]byte(rec.Stdout), &st); err != nil || st.Lines != 2 || st.Words != 6 || st.Sentences != 2 || st.TopWords[0].Word != "the" || st.TopWords[0].Count != 2 {
		t.Fatalf("textstat: %v %s", err, rec.Stdout)
	}

	// hostile is in the tools folder but not on the default tools.allow.
	r = d.ox("", "ox-exec", "-a", "ops", "--wasm", "hostile", "read", "/etc/passwd")
	if r.code != 77 || !strings.Contains(r.stderr, "tools.allow") || strings.Contains(r.stdout, "root:") {
		t.Fatalf("a tool off the allow list: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := d.ox("", "ox-exec", "-a", "ops", "--wasm", "nosuch"); r.code != 77 {
		t.Fatalf("a tool that is nowhere, off the allow list: %d %s", r.code, r.stderr)
	}
	if r := d.ox("", "ox-exec", "-a", "ops", "--wasm", "../bin/oxiosd"); r.code == 0 {
		t.Fatalf("a path for a tool: %d %s", r.code, r.stderr)
	}

	// tool.list: every tool, and whether ops may run it.
	allowed := map[string]bool{}
	err := d.client(t).ToolList(context.Background(), "ops", func(ti proto.ToolInfoRecord) error {
		allowed[ti.Name] = ti.Allowed
		if ti.Type != "tool_info" || len(ti.InputSchema) == 0 || ti.InputSchema[0] != '{' {
			t.Errorf("tool_info %+v", ti)
		}
		return nil
	})
	if err != nil || len(allowed) != 3 || !allowed["jsonq"] || !allowed["textstat"] || allowed["hostile"] {
		t.Fatalf("tool.list: %v %v", allowed, err)
	}

	// The audit log has each call with its status and output digest, and
	// the refusal with its rule.
	l := d.ox("", "ox-audit", "log", "--op", "tool.run")
	var ok, eperm int
	for _, e := range records(t, l.stdout) {
		target, _ := e["target"].(string)
		switch {
		case e["result"] == "ok" && strings.HasPrefix(target, "ops:tool ") && strings.Contains(target, " => status ") && strings.Contains(target, " output "):
			ok++
		case e["result"] == "EPERM" && strings.Contains(target, "ops:tool hostile [tools.allow]"):
			eperm++
		}
	}
	if ok != 4 || eperm != 1 {
		t.Fatalf("audited: %d calls, %d refusals of hostile; want 4, 1:\n%s", ok, eperm, l.stdout)
	}
	d.stop()
}

// TestWasmRootlessRun: a tool called from a run of a rootless oxiosd
// works in the run's workspace, a filesystem of the run's own namespace
// that oxiosd reaches through the run's root.
func TestWasmRootlessRun(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start oxiosd as another (ordinary) user")
	}
	dir := wasmTools(t, "jsonq=hostile")
	// The rootless daemon's own tools and cache of compiled tools: a
	// copy of the tests' shared one (compiling hostile again under -race
	// would cost about 12 s of CPU, and the compile is not this test's
	// subject).
	if out, err := exec.Command("cp", "-a", toolCache(), filepath.Join(dir, "cache")).CombinedOutput(); err != nil {
		t.Fatalf("copying the cache of compiled tools: %v\n%s", err, out)
	}
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, nobodyUID, nobodyUID) })
	d := startDaemon(t, daemonOpts{config: "[runs]\ntools = \"" + dir + "\"\ntools_cache = \"" + filepath.Join(dir, "cache") + "\"\n", uid: nobodyUID})
	createAgent(t, d, "ops")
	out := runOutput(t, d, "ops", `echo mine > /work/in; ox-exec --json --wasm jsonq -- write /work/out >/dev/null; echo "wrote=$(cat /work/out)"
ox-exec --json --wasm jsonq -- read /work/in | grep -c mine; ox-exec --json --wasm jsonq -- read /etc/passwd; echo "passwd rc=$?"`)
	if !strings.Contains(out, "wrote=hostile") || !strings.Contains(out, "\n1\n") || !strings.Contains(out, "passwd rc=") || strings.Contains(out, "passwd rc=0") || strings.Contains(out, "root:") {
		t.Fatalf("a tool in a rootless run's workspace: %q", out)
	}
}

// TestWasmHostile runs a hostile module under an allowed name (the
// default policy allows jsonq): the sandbox, not the policy, must stop it.
func TestWasmHostile(t *testing.T) {
	t.Parallel()
	dir := wasmTools(t, "jsonq=hostile")
	d := startDaemon(t, daemonOpts{config: toolsConfig(dir)})
	createAgent(t, d, "ops")
	tool := func(stdin string, args ...string) (result, proto.ToolRecord) {
		t.Helper()
		r := d.ox(stdin, "ox-exec", append([]string{"-a", "ops", "--json", "--wasm", "jsonq", "--"}, args...)...)
		var rec proto.ToolRecord
		if r.stdout != "" {
			if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
				t.Fatalf("%v: %v %q", args, err, r.stdout)
			}
		}
		return r, rec
	}
	if r, rec := tool("hi", "echo"); r.code != 0 || rec.Stdout != "hi" {
		t.Fatalf("echo: %d %+v %s", r.code, rec, r.stderr)
	}
	// Files: the workspace is /work; the host is not there, even through
	// a symlink the agent left in its workspace. A tool called from a run
	// works in the run's workspace, which lives as long as the run.
	script := fmt.Sprintf(`ox-exec --json --wasm jsonq -- write /work/out >/dev/null; echo "wrote=$(cat /work/out)"
ln -s /etc/passwd /work/passwd
for p in /etc/passwd /work/../../etc/passwd /work/passwd %s; do ox-exec --json --wasm jsonq -- read $p; echo "read $p rc=$?"; done`, filepath.Join(d.data, "audit"))
	out := runOutput(t, d, "ops", script)
	if !strings.Contains(out, "wrote=hostile") {
		t.Fatalf("write to the run's workspace: %q", out)
	}
	if strings.Contains(out, "root:") || strings.Count(out, " rc=0") != 0 || strings.Count(out, "read ") != 4 {
		t.Errorf("reads outside the workspace: %q", out)
	}
	// An exec outside a run has a workspace of its own, new each time:
	// the last one's file is not there.
	if r, rec := tool("", "write", "/work/out"); r.code != 0 || rec.Status != 0 {
		t.Fatalf("write to the workspace: %d %+v", r.code, rec)
	}
	if r, rec := tool("", "read", "/work/out"); r.code == 0 || rec.Status == 0 {
		t.Errorf("a second exec read the first's file: %d %+v", r.code, rec)
	}
	// No network.
	if r, rec := tool("", "dial", "127.0.0.1:1"); r.code == 0 || !strings.Contains(rec.Stderr, "dial") {
		t.Errorf("dial: %d %+v", r.code, rec)
	}
	// Time: ended at the timeout, reported as such.
	r := d.ox("", "ox-exec", "-a", "ops", "--json", "--timeout", "500ms", "--wasm", "jsonq", "--", "loop")
	var rec proto.ToolRecord
	json.Unmarshal([]byte(r.stdout), &rec)
	if r.code != 137 || !rec.TimedOut {
		t.Fatalf("loop: %d %+v %s", r.code, rec, r.stderr)
	}
	// Memory: past tools.memory (64MiB in the default policy) it fails.
	if r, rec := tool("", "alloc", "256"); r.code == 0 || strings.Contains(rec.Stdout, "allocated") {
		t.Errorf("alloc 256MiB: %d %+v", r.code, rec)
	}
	// Output: cut at exec.output_cap (1MiB).
	if r, rec := tool("", "spew", "3000000"); r.code != 0 || len(rec.Stdout) != 1<<20 || !rec.Truncated {
		t.Errorf("spew: %d, %d bytes, truncated %v", r.code, len(rec.Stdout), rec.Truncated)
	}
	// The daemon is fine: the tool runs again, and it stops cleanly.
	if r, rec := tool("still here", "echo"); r.code != 0 || rec.Stdout != "still here" {
		t.Fatalf("echo after the hostile calls: %d %+v", r.code, rec)
	}
	d.stop()
}
