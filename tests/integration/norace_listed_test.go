package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestNoRaceListed: a test that skips itself under -race (noRace) must be
// one make test's step without -race runs, or it never runs at all.
func TestNoRaceListed(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\t(?:\w+=\S+ )*\$\(GO\) test -count=1 -timeout \w+ -run='([^']+)' \./tests/integration$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no go test line without -race for ./tests/integration in the Makefile's test target")
	}
	runs := regexp.MustCompile(regexp.MustCompile(`\$\$`).ReplaceAllString(string(m[1]), `$$`))
	files, _ := filepath.Glob("*_test.go")
	fn := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\) \{\n(?:\t//.*\n)*\tnoRace\(t\)`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, sm := range fn.FindAllSubmatch(b, -1) {
			n++
			if !runs.Match(sm[1]) {
				t.Errorf("%s (%s) skips itself under -race, and make test's step without -race (-run='%s') does not run it", sm[1], f, m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("found no test calling noRace: this check looks for the wrong thing")
	}
}
