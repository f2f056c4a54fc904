package version

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/oxios/oxios/pkg/durable"
)

// treeFiles is a tree like an agent population's state: n files of 100-500
// bytes in a few hundred folders.
func treeFiles(n int) map[string][]byte {
	files := make(map[string][]byte, n)
	for i := range n {
		p := fmt.Sprintf("agents/a%02d/state/d%02d/k%05d.md", i%20, i/20%20, i)
		files[p] = fmt.Appendf(nil, "key %d\n%s\n", i, bytes.Repeat([]byte("state "), 15+i%65))
	}
	return files
}

func putAll(b testing.TB, tx *Tx, files map[string][]byte) {
	for p, v := range files {
		if err := tx.Put(p, v); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRepo is a repository on /tmp holding the 10,000-file tree.
func benchRepo(b *testing.B, n int) (*Repo, []string) {
	r, err := Open(filepath.Join(b.TempDir(), "repo"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	files := treeFiles(n)
	tx, _ := r.Begin()
	putAll(b, tx, files)
	if _, err := tx.Commit(CommitOptions{Message: "initial"}); err != nil {
		b.Fatal(err)
	}
	paths := make([]string, 0, n)
	for p := range files {
		paths = append(paths, p)
	}
	return r, paths
}

func benchIncremental(b *testing.B, changed int) {
	r, paths := benchRepo(b, 10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tx, err := r.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for j := range changed {
			tx.Put(paths[(i*changed+j)%len(paths)], fmt.Appendf(nil, "value %d/%d, some state\n", i, j))
		}
		if _, err := tx.Commit(CommitOptions{Message: "incremental"}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/commit")
}

// BenchmarkCommit1of10000 is the daemon's common case: a commit of one
// changed file in a tree of 10,000 (mostly fsync: pack, index, folder,
// ref, folder).
func BenchmarkCommit1of10000(b *testing.B) { benchIncremental(b, 1) }

// BenchmarkCommit10of10000 commits 10 changed files in a tree of 10,000.
func BenchmarkCommit10of10000(b *testing.B) { benchIncremental(b, 10) }

// BenchmarkCommit1000of10000 commits 1,000 changed files in a tree of
// 10,000.
func BenchmarkCommit1000of10000(b *testing.B) { benchIncremental(b, 1000) }

// BenchmarkCommitInitial10000 commits 10,000 new files into an empty
// repository.
func BenchmarkCommitInitial10000(b *testing.B) {
	files := treeFiles(10000)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		r, err := Open(filepath.Join(b.TempDir(), "repo"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		tx, _ := r.Begin()
		putAll(b, tx, files)
		if _, err := tx.Commit(CommitOptions{Message: "initial"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		r.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/commit")
}

// BenchmarkLog walks 200 commits of history filtered by an agent prefix.
func BenchmarkLog(b *testing.B) {
	r, paths := benchRepo(b, 10000)
	for i := range 200 {
		tx, _ := r.Begin()
		tx.Put(paths[i*37%len(paths)], fmt.Appendf(nil, "v%d", i))
		if _, err := tx.Commit(CommitOptions{Message: "c"}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		n := 0
		if err := r.Log("HEAD", "agents/a03", 0, func(Commit) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObjectWrite is the measurement behind writing one pack per
// commit rather than loose objects: the objects of a commit (blobs, the
// trees on their paths, the commit) written durably both ways.
func BenchmarkObjectWrite(b *testing.B) {
	for _, n := range []int{1, 10, 10000} {
		objs := make([]object, 0, n+8)
		for p, v := range treeFiles(n) {
			objs = append(objs, object{typ: objBlob, id: hashObject(objBlob, v), data: v})
			_ = p
		}
		// The trees on a path agents/aNN/state/dNN/ and the commit.
		for i := range 5 {
			t := fmt.Appendf(nil, "tree %d", i)
			objs = append(objs, object{typ: objTree, id: hashObject(objTree, t), data: t})
		}
		b.Run(fmt.Sprintf("pack/%d", len(objs)), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				db := scratchODB(b)
				b.StartTimer()
				if err := db.writePack(objs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				db.close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/op")
		})
		b.Run(fmt.Sprintf("loose/%d", len(objs)), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				db := scratchODB(b)
				b.StartTimer()
				if err := writeLoose(db.dir, objs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				db.close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/op")
		})
	}
}

func scratchODB(b *testing.B) *odb {
	dir := filepath.Join(b.TempDir(), "objects")
	if err := os.MkdirAll(filepath.Join(dir, "pack"), 0o755); err != nil {
		b.Fatal(err)
	}
	db, err := openODB(dir)
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// writeLoose writes objects the way git does without a pack, made
// durable as a commit needs: each file fsynced and renamed into its
// objects/xx folder, then each folder touched fsynced.
func writeLoose(dir string, objs []object) error {
	dirs := map[string]bool{}
	var buf bytes.Buffer
	for _, o := range objs {
		buf.Reset()
		z, _ := zlib.NewWriterLevel(&buf, zlib.BestSpeed)
		z.Write(objHeader(nil, o.typ, len(o.data)))
		z.Write(o.data)
		z.Close()
		h := o.id.String()
		sub := filepath.Join(dir, h[:2])
		if !dirs[sub] {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
			dirs[sub] = true
		}
		if err := writeFileDurableNoDirSync(filepath.Join(sub, h[2:]), buf.Bytes()); err != nil {
			return err
		}
	}
	for d := range dirs {
		if err := durable.SyncDir(d); err != nil {
			return err
		}
	}
	return durable.SyncDir(dir)
}

func writeFileDurableNoDirSync(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "tmp_obj_")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// BenchmarkFork10000 forks an agent holding 10,000 files, with its
// budget changed in the fork's commit, as the kernel does: it should
// cost about what BenchmarkCommit1of10000 does, whatever the agent holds.
func BenchmarkFork10000(b *testing.B) {
	r, err := Open(filepath.Join(b.TempDir(), "repo"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	files := map[string][]byte{"agents/a/sys/budget.json": []byte(`{"used":{"tokens":5}}`)}
	for p, v := range treeFiles(10000) {
		files["agents/a/state/"+p] = v
	}
	tx, _ := r.Begin()
	putAll(b, tx, files)
	point, err := tx.Commit(CommitOptions{Message: "initial"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		name := fmt.Sprint("f", i)
		after := []PathChange{{Path: "agents/" + name + "/sys/budget.json", Action: Modified, To: `{"used":{}}`}}
		if _, err := r.Fork(ForkOptions{From: "a", Name: name, Point: point.Hash,
			After: func() []PathChange { return after }, When: testTime}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/fork")
}

// BenchmarkCommit10AtScale commits 10 changed files of one agent whose
// state holds 10k, 100k or 1M files in folders of 1,000 (the scale rows
// of `make bench`, at the library): a commit's cost should follow what
// changed, not the tree (issue 51: within 2x at 1M of 10k).
func BenchmarkCommit10AtScale(b *testing.B) {
	for _, n := range []int{10000, 100000, 1000000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, err := Open(filepath.Join(b.TempDir(), "repo"))
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			key := func(i int) string { return fmt.Sprintf("agents/scale/state/d%04d/k%07d", i/1000, i) }
			val := bytes.Repeat([]byte("v"), 100)
			tx, _ := r.Begin()
			for i := range n {
				if err := tx.Put(key(i), val); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := tx.Commit(CommitOptions{Message: "initial"}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			round := 0
			for b.Loop() {
				tx, err := r.Begin()
				if err != nil {
					b.Fatal(err)
				}
				for j := range 10 {
					tx.Put(key((j*n/10+round*7)%n), fmt.Appendf(nil, "round %d", round))
				}
				if _, err := tx.Commit(CommitOptions{Message: "10 keys"}); err != nil {
					b.Fatal(err)
				}
				round++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/commit")
		})
	}
}
