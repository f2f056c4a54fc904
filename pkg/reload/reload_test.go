package reload

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/config"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestLive(t *testing.T) {
	var l Live
	cfg := config.Config{}
	cfg.LLM.Model = "a"
	if got := l.Load(&cfg); got.LLM.Model != "a" {
		t.Fatalf("fallback: %+v", got)
	}
	next := cfg
	next.LLM.Model = "b"
	l.Store(next)
	if got := l.Load(&cfg); got.LLM.Model != "b" {
		t.Fatalf("stored: %+v", got)
	}
}

func TestRestart(t *testing.T) {
	cur := config.Config{Data: "/d", Socket: "/s"}
	next := cur
	next.LLM.Model = "other" // live: no restart
	if got := Restart(cur, next); len(got) != 0 {
		t.Errorf("a live change needs a restart: %v", got)
	}
	next.Socket, next.NoMount, next.Runs.MaxConcurrent = "/t", true, 3
	if got := Restart(cur, next); !slices.Equal(got, []string{"socket", "mount", "runs"}) {
		t.Errorf("restart: %v", got)
	}
}

func TestPolicyFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ops.toml"), []byte("[state]\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "Not An Agent.toml"), nil, 0o600)
	if got := PolicyFiles(dir); len(got) != 2 {
		t.Fatalf("files: %v", got)
	}
	if a, text, ok := PolicyFile(quiet, filepath.Join(dir, "ops.toml")); !ok || a != "ops" || string(text) != "[state]\n" {
		t.Errorf("ops.toml: %q %q %v", a, text, ok)
	}
	if _, _, ok := PolicyFile(quiet, filepath.Join(dir, "Not An Agent.toml")); ok {
		t.Error("a file not named for an agent was read")
	}
	if _, _, ok := PolicyFile(quiet, filepath.Join(dir, "gone.toml")); ok {
		t.Error("a missing file was read")
	}
}

func TestApplyPolicyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ops.toml")
	os.WriteFile(file, []byte("[state]\n"), 0o600)
	inForce := map[string]string{}
	var sets []string
	current := func(agent string) ([]byte, error) { return []byte(inForce[agent]), nil }
	set := func(agent string, text []byte) error {
		sets = append(sets, agent)
		if string(text) == "bad" {
			return errors.New("does not parse")
		}
		inForce[agent] = string(text)
		return nil
	}
	ApplyPolicyFile(quiet, file, current, set)
	if inForce["ops"] != "[state]\n" || len(sets) != 1 {
		t.Fatalf("not applied: %v %v", inForce, sets)
	}
	// Unchanged: not set again.
	ApplyPolicyFile(quiet, file, current, set)
	if len(sets) != 1 {
		t.Fatalf("set again: %v", sets)
	}
	// Refused: what was in force stays.
	os.WriteFile(file, []byte("bad"), 0o600)
	ApplyPolicyFile(quiet, file, current, set)
	if len(sets) != 2 || inForce["ops"] != "[state]\n" {
		t.Fatalf("%v %v", inForce, sets)
	}
	// Not an agent's file: nothing read, nothing set.
	ApplyPolicyFile(quiet, filepath.Join(dir, "Not An Agent.toml"), current, set)
	if len(sets) != 2 {
		t.Fatalf("%v", sets)
	}
}

func TestWatch(t *testing.T) {
	dir, pol := t.TempDir(), t.TempDir()
	cfgFile := filepath.Join(dir, "oxios.toml")
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	configs := make(chan struct{}, 8)
	policies := make(chan string, 8)
	done := make(chan error)
	go func() {
		done <- Watch(ctx, quiet, cfgFile, pol, Hooks{
			Started: func() { close(started) },
			Config:  func() { configs <- struct{}{} },
			Policy:  func(f string) { policies <- f },
		})
	}()
	<-started
	os.WriteFile(cfgFile, []byte("x"), 0o600)
	os.WriteFile(filepath.Join(pol, "ops.toml"), []byte("a"), 0o600)
	os.WriteFile(filepath.Join(pol, ".ops.toml.swp"), []byte("a"), 0o600)
	wait := time.After(10 * time.Second)
	select {
	case <-configs:
	case <-wait:
		t.Fatal("no config change seen")
	}
	select {
	case f := <-policies:
		if filepath.Base(f) != "ops.toml" {
			t.Errorf("policy change: %s", f)
		}
	case <-wait:
		t.Fatal("no policy change seen")
	}
	select {
	case f := <-policies:
		t.Errorf("a second policy change: %s", f)
	case <-time.After(2 * Settle):
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
