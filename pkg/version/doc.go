// Package version keeps the history of oxiosd's data directory DATA/repo
// in git: a normal, non-bare repository (DATA/repo/.git) whose work tree
// holds agents/<name>/{state/**, mem/<kind>/<id>.md, policy.toml}. Plain
// git reads it (git log, git show, git diff REV REV, git fsck --strict);
// the daemon is its only writer.
//
// # Use
//
// The kernel's committer knows which paths changed since the last commit
// and hands their content over:
//
//	tx, err := repo.Begin()
//	tx.Put("agents/ops/state/notes/today.md", data)
//	tx.Delete("agents/ops/state/old.md")
//	c, err := tx.Commit(version.CommitOptions{Message: "state: 2 changes",
//		Trailers: []version.Trailer{{Key: "Oxios-Audit-Seq", Value: "42"}}})
//
// Readers (Log, Show, Files, ReadBlob, Resolve, Head, Tags) run from any
// goroutine, also during a commit.
//
// The live tree (live.go) is how the state maps onto the tree
// (SpacePath, SplitSpacePath) and the walks that compare the two:
// Rescan (every path where the state differs from HEAD), Stage (a
// commit's paths as the state has them), LiveFiles and Patch (diffs
// against the state), Diff (two commits, or a commit and the state,
// compared), Record, Records and ShowRecord (a commit, a log, as the wire
// has them). The kernel runs them on its committer goroutine, where no
// change lands meanwhile. So it does what is built on them: Save (a
// commit of the live state, the audit head in its trailers) and
// RestorePlan (what a restore changes, each change with its audit entry)
// in snapshot.go; SaveUncommitted (a commit of an agent's uncommitted
// paths) and PlanRestore (a restore's plan from a revision) in work.go;
// Work (audited.go), the commit, tag, restore and diff against the state
// of the kernel's syscalls, each audited through the kernel's Auditor;
// Fork, PrepareFork, ForkPoint and AgentDiff (a fork's commit, its point,
// two agents compared) in fork.go. A prepared commit may be published
// before it is written, its durability the caller's journal's
// (pending.go). Push (push.go) sends the branch and its tags to a git
// remote.
//
// # Why not go-git's worktree
//
// A commit through a work tree and an index (git add -A, or go-git's
// Worktree.Add and Status) first finds what changed by looking at every
// file: its cost grows with the size of the tree. Here the caller says
// what changed, so nothing scans the work tree and no index is kept; a
// commit costs what changed. (The consequence: `git status` in DATA/repo
// has no index to compare with and reports every file; use git diff
// between revisions instead.)
//
// The objects are not read or written through go-git's storage either:
// its filesystem storage loads the list of pack indexes once and only
// learns of packs it wrote itself (Reindex reloads every index, a cost
// that grows with the repository), and its packfile reader seeks a shared
// file, so concurrent readers would serialize on one lock. This package
// reads packs with pread, keeps each pack index in memory as written, and
// uses go-git for formats: delta patching (git gc writes deltas), ref
// name rules and the unified diff encoder.
//
// # Tree cache
//
// The committer keeps the tree of the last commit in memory: per folder,
// its entries in git order ("a.md" < "a/" < "a0": a folder sorts as its
// name plus "/") and its tree hash. It is loaded lazily, one folder at a
// time as commits reach it, and never reloaded while this Repo made the
// last commit (Begin rereads the branch ref and drops the cache if
// something else moved it). A commit builds new nodes, never changing old
// ones, for the folders on the paths of changed files and their
// ancestors, writes only those trees, and installs the new root once the
// commit is durable, so an aborted or failed transaction leaves the cache
// as it was. Folders left empty vanish; files get mode 100644, folders
// 40000.
//
// # One pack per commit
//
// Each commit writes all its new objects (blobs not already stored, the
// rebuilt trees and the commit) as one packfile and its version 2 index,
// written directly (no re-parse). Measured on the reference disk (ext4,
// file creation 0.1-1 ms), with each object durable as a commit needs
// (BenchmarkObjectWrite): 6 objects, 1.3 ms as a pack against 9.8 ms as
// loose objects; 15 objects, 1.9 ms against 33 ms; 10,005 objects, 34 ms
// against 9.2 s. A pack costs two files and two fsyncs whatever the
// commit's size; loose objects cost one file and one fsync each, so a
// pack wins even for one changed file.
//
// Packs are bounded: when there are more than 50 (git's gc.autoPackLimit),
// the smallest are merged into one until the sizes form a geometric
// progression of factor 2 (git repack --geometric=2), so each object is
// rewritten O(log n) times over the repository's life and a commit rarely
// merges more than the recent small packs. Merging copies whole objects
// as they are (no recompression) and resolves the deltas of packs git
// wrote. Packs with a .keep file are left alone. Objects the repository
// already has (the same content at another path, a file changed back)
// are not written again.
//
// # Durability
//
// A commit is durable when Commit returns. The order: the pack and its
// index are written to temp files in objects/pack and the branch's new
// value to refs/heads/main.lock, the three fsynced side by side (one
// wait where there were three: BenchmarkCommit10of10000 3.7-4.8 ms a
// commit against 4.3-5.2 ms with them in turn); the pack and
// index are renamed into place (pack first: readers find packs by their
// index) and the folder fsynced; only then is the lock file renamed over
// the branch and its folder fsynced. A crash at any point leaves the
// branch naming the old commit or the new one, with all its objects, and
// at worst unreferenced objects or temp files, which Open removes. A
// merge of packs writes and syncs the merged pack before deleting the
// packs it replaces.
package version
