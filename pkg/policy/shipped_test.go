package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// TestShippedPolicies: the default policy and the templates of
// share/policies parse, and each says what its comments promise.
func TestShippedPolicies(t *testing.T) {
	files, err := filepath.Glob("../../share/policies/*.toml")
	if err != nil || len(files) < 3 {
		t.Fatalf("share/policies: %v %v", files, err)
	}
	got := map[string]*Policy{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got[filepath.Base(f)] = p
	}
	ro, locked := got["readonly.toml"], got["locked.toml"]
	if ro == nil || locked == nil {
		t.Fatalf("templates missing: %v", files)
	}
	if ro.CheckStateWrite("notes/today", 0) != nil || ro.CheckStateWrite("config", 0) == nil {
		t.Error("readonly.toml: writes notes/** and nothing else")
	}
	if _, err := ro.CheckExec([]string{"rm", "-rf", "x"}, ""); err == nil {
		t.Error("readonly.toml: rm allowed")
	}
	if locked.CheckStateRead("a/b") != nil || locked.CheckStateWrite("a/b", 0) == nil {
		t.Error("locked.toml: reads, never writes")
	}
	if _, err := locked.CheckExec([]string{"cat", "x"}, ""); err == nil {
		t.Error("locked.toml: exec allowed")
	}
	if locked.CheckTool("jsonq") == nil || locked.CheckHost("example.org") == nil {
		t.Error("locked.toml: a tool or a host allowed")
	}
}
