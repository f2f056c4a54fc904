package version

import (
	"bytes"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	fdiff "github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/utils/diff"
)

// Unified writes the change of the file at path from one content to
// another as a git patch: "diff --git a/P b/P", the mode and index lines
// (full hashes, as `git diff --full-index` writes them), and hunks with 3
// lines of context; "Binary files a/P and b/P differ" when either side has
// a NUL byte in its first 8000 bytes, as git decides. fromExists and
// toExists tell a new or deleted file from an empty one. Nothing is
// written when the two sides are the same.
//
// The hunks come from go-git's encoder; its "@@ ... @@ <context>" line
// quotes the line just before the hunk, where git looks for the closest
// line that starts with a letter, '_' or '$'.
func Unified(w io.Writer, path string, from, to []byte, fromExists, toExists bool) error {
	if fromExists == toExists && bytes.Equal(from, to) {
		return nil
	}
	// A new or deleted empty file has no hunk, and git then writes no
	// "---"/"+++" lines; go-git's encoder always does.
	if !fromExists && len(to) == 0 || !toExists && len(from) == 0 {
		how, a, b := "new", plumbing.ZeroHash.String(), BlobHash(to)
		if !toExists {
			how, a, b = "deleted", BlobHash(from), plumbing.ZeroHash.String()
		}
		_, err := fmt.Fprintf(w, "diff --git a/%s b/%s\n%s file mode 100644\nindex %s..%s\n", path, path, how, a, b)
		return err
	}
	fp := &filePatch{binary: isBinary(from) || isBinary(to)}
	if fromExists {
		fp.from = patchFile{path: path, hash: plumbing.ComputeHash(plumbing.BlobObject, from)}
	}
	if toExists {
		fp.to = patchFile{path: path, hash: plumbing.ComputeHash(plumbing.BlobObject, to)}
	}
	fp.hasFrom, fp.hasTo = fromExists, toExists
	if !fp.binary {
		for _, d := range diff.Do(string(from), string(to)) {
			// diffmatchpatch's operations are DiffDelete = -1,
			// DiffEqual = 0, DiffInsert = 1; comparing with 0 spares a
			// direct dependency on the module go-git wraps.
			op := fdiff.Equal
			switch {
			case d.Type > 0:
				op = fdiff.Add
			case d.Type < 0:
				op = fdiff.Delete
			}
			fp.chunks = append(fp.chunks, chunk{text: d.Text, op: op})
		}
	}
	return fdiff.NewUnifiedEncoder(w, fdiff.DefaultContextLines).Encode(patch{fp})
}

// isBinary is git's test (buffer_is_binary): a NUL in the first 8000 bytes.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// patch, filePatch, patchFile and chunk implement go-git's diff.Patch for
// one file.
type patch struct{ fp *filePatch }

func (p patch) FilePatches() []fdiff.FilePatch { return []fdiff.FilePatch{p.fp} }
func (p patch) Message() string                { return "" }

type filePatch struct {
	from, to       patchFile
	hasFrom, hasTo bool
	binary         bool
	chunks         []fdiff.Chunk
}

func (f *filePatch) IsBinary() bool        { return f.binary }
func (f *filePatch) Chunks() []fdiff.Chunk { return f.chunks }

func (f *filePatch) Files() (from, to fdiff.File) {
	// A nil File, not a nil *patchFile in the interface, marks the side
	// that does not exist.
	if f.hasFrom {
		from = f.from
	}
	if f.hasTo {
		to = f.to
	}
	return from, to
}

type patchFile struct {
	path string
	hash plumbing.Hash
}

func (f patchFile) Hash() plumbing.Hash     { return f.hash }
func (f patchFile) Mode() filemode.FileMode { return filemode.Regular }
func (f patchFile) Path() string            { return f.path }

type chunk struct {
	text string
	op   fdiff.Operation
}

func (c chunk) Content() string       { return c.text }
func (c chunk) Type() fdiff.Operation { return c.op }

var _ fdiff.Patch = patch{}
var _ fdiff.FilePatch = (*filePatch)(nil)
var _ fdiff.File = patchFile{}
var _ fdiff.Chunk = chunk{}
