// Package testbin hands the integration and documentation tests the
// commands `make test` built once for all of them (OXIOS_TEST_BIN), so
// that each does not link all of cmd/ again.
package testbin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Env names the folder make test built the commands into
// (go build -tags urfave_cli_no_docs -o DIR/ ./cmd/...).
const Env = "OXIOS_TEST_BIN"

// Link puts the commands of pre into dir, but those named in skip: hard
// links where it can (a command that finds its fellows beside itself
// finds them in dir), else copies.
func Link(pre, dir string, skip []string) error {
	ents, err := os.ReadDir(pre)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() || slices.Contains(skip, e.Name()) {
			continue
		}
		from, to := filepath.Join(pre, e.Name()), filepath.Join(dir, e.Name())
		if os.Link(from, to) != nil {
			b, err := os.ReadFile(from)
			if err == nil {
				err = os.WriteFile(to, b, 0o755)
			}
			if err != nil {
				return err
			}
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s: no commands in %s", Env, pre)
	}
	return nil
}
