package version

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// gitEnv makes git independent of the machine's configuration.
var gitEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
	"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	"LC_ALL=C", "TZ=UTC",
}

func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

// git runs git in dir and returns its stdout; it fails the test on error.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitErr(dir, "", args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func gitErr(dir, stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), gitEnv...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// fsck checks the repository with git fsck --strict: no error, no warning.
func fsck(t testing.TB, dir string) {
	t.Helper()
	needGit(t)
	out, err := gitErr(dir, "", "fsck", "--strict", "--no-dangling", "--full")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("git fsck --strict: %v\n%s", err, out)
	}
}

func open(t testing.TB) *Repo {
	t.Helper()
	r, err := Open(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

var testTime = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func opts(msg string) CommitOptions {
	return CommitOptions{Message: msg, Author: Signature{Name: "Ops Agent", Email: "ops@oxios", When: testTime}}
}

// change commits puts (content) and deletes (nil value) in one commit.
func change(t testing.TB, r *Repo, files map[string][]byte, msg string) Commit {
	t.Helper()
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if files[p] == nil {
			err = tx.Delete(p)
		} else {
			err = tx.Put(p, files[p])
		}
		if err != nil {
			tx.Abort()
			t.Fatal(err)
		}
	}
	c, err := tx.Commit(opts(msg))
	if err != nil {
		t.Fatalf("commit %q: %v", msg, err)
	}
	return c
}

// model applies the same changes to a map, to compare with the repository.
func model(m map[string]string, files map[string][]byte) {
	for p, v := range files {
		if v == nil {
			delete(m, p)
		} else {
			m[p] = BlobHash(v)
		}
	}
}

func mustFiles(t testing.TB, r *Repo, rev, prefix string) map[string]string {
	t.Helper()
	fs, err := r.Files(rev, prefix)
	if err != nil {
		t.Fatalf("Files(%s, %q): %v", rev, prefix, err)
	}
	return fs
}

// lsTree is `git ls-tree -r` of rev as path -> blob.
func lsTree(t testing.TB, dir, rev string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for line := range strings.Lines(git(t, dir, "-c", "core.quotepath=off", "ls-tree", "-r", rev)) {
		meta, path, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		f := strings.Fields(meta)
		if f[0] != "100644" || f[1] != "blob" {
			t.Fatalf("ls-tree: unexpected entry %q", line)
		}
		m[path] = f[2]
	}
	return m
}

func isErr(err, target error) bool { return errors.Is(err, target) }
