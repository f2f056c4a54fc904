package state

// Values without a file per key: the design (issue 51), and what of it
// is built.
//
// # What depends on values being files today
//
//   - The applier (apply.go): a temp file and a rename per change, the
//     spares, the floor of free space per file; 47% of the daemon's time
//     at 64 clients saving.
//   - Reads: Load and Open read the key's file when the value is neither
//     pending nor cached; Open hands the mount an *os.File, which it
//     serves with splice or passthrough.
//   - Forks (fork.go): a fork's keys are hard links to its origin's
//     files, made by the applier in publication order, with a syncfs
//     after the last.
//   - Start: the index comes from the key snapshot (snapshot.go), checked
//     against the folders' stamps, else from a walk of every file.
//   - Checkpoints: one syncfs makes the work tree durable before the
//     journal is recycled.
//   - Removal of keys and agents: a tomb per key until its file is gone.
//   - Tests that look at DATA/repo/agents/... directly (pkg/state and
//     tests/integration).
//
// Not the git side: commits already stage values from the store (Load,
// see version.Stage) into a tree built from the cached HEAD tree, so
// restores, diffs (ox-commit diff), receipts and recovery's repository
// check read git objects or the store, never the work tree.
//
// # The store chosen: segments of our own behind the journal
//
// Measured with a throwaway program on this machine (1M keys of 100 B,
// no sync per write, as behind our journal): segment files with an
// in-memory index filled at 245k keys/s, loaded at p50 3 us / p99 32 us,
// and cost 113 B a key of index; Pebble v1.1.5 with its WAL off filled at
// 438k/s, loaded at p50 13 us / p99 82 us, and 10 B a key (its index is
// on disk). Both are far above the 50k/s target, which the journal and
// the socket bound, not the store. The segments win because the store
// keeps an index entry per key in memory anyway (size, time, version,
// the cached value): a location added to it is 8 bytes, where Pebble is a
// second index of every key, its own compactions and a large dependency,
// for durability our journal already gives.
//
// The shape (Bitcask, with WiscKey's values apart from the index):
//
//   - DATA/values/NNNNNNNN: append-only segments of records (crc, tree,
//     key, version, value). The applier appends a run's changes to the
//     open segment with one write, instead of a file per key; nothing is
//     synced per write.
//   - entry gains the value's place (segment, offset); values never
//     change in place, so a reader that took a place under the agent's
//     lock reads the right bytes without it (a segment is deleted only
//     when no index entry and no reader holds it).
//   - A checkpoint fdatasyncs the segments written since the last and
//     starts a new journal file, keeping the old one; the index
//     checkpoint (the key snapshot, with each key's place) is written
//     behind it, fuzzy as the key snapshot is today, and once it is
//     durable the journal files older than its generation are deleted.
//     Written inside the checkpoint it would hold the committer for the
//     whole encoding (0.3 s at a million keys), which the recovery
//     issue's bound on other agents' waits (tens of ms) forbids; kept
//     journal files make the fuzzy snapshot enough without any walk.
//     After a crash the index comes from the last durable snapshot and
//     the journal files from its generation on replay the rest, which
//     the applier appends again: the applied store is rebuilt from the
//     journal, never trusted past its checkpoint. A damaged snapshot is
//     refused like a damaged journal, and salvaged from the segments'
//     own records (each names its tree, key and version; deletes and
//     forks are records too).
//   - A fork copies index entries (places included): no links, no
//     syncfs, and a replayed fork clones the keys its record names, as
//     now. A removal drops entries; a tomb is an index matter only.
//   - Compaction: a segment whose live bytes fall below half is copied
//     forward by the applier (its live values appended again) and
//     deleted after the next checkpoint.
//   - The mount reads a value's bytes (Open returns them; a value is at
//     most MaxValue); DATA/repo becomes a repository without a work tree.
//     Memories live in the same segments (space "mem") and stay one file
//     per memory in the views: the mount and the git tree.
//
// # What is built so far
//
// Listings stream in key order from a sorted order each tree keeps
// (sorted.go), so `ox-state ls` and the mount's folders give their first
// record at once at any size. A commit of many paths takes them out of
// the uncommitted list at once (pkg/uncommitted), so a commit of 10 keys
// after the first commit of a million no longer reads the million again.
// The segments are not built yet: values are still files of the work
// tree, and the notes above are the plan.
//
// What the files cost, measured (go run ./tests/bench -only recall, the
// FTS5 anchor through SQLite's C library with prepared statements): a
// bulk remember of 100k lines is answered at 14.6k/s and the daemon is
// idle at 6.2k/s, 77.5 us of CPU a memory for the whole drain, against
// FTS5's 67.5k/s and 8.6 us. And a forget of every memory of an agent
// (BenchmarkForgetAll, OXIOS_BENCH_FORGET=300000): 10.4 s at 300k, of
// which 2.7 s is CPU on the forget's path; in groups of 4,096 instead of
// 512 it still took 9.3 s. What it waits for is the file system: each
// group's fdatasync commits the metadata of the files the applier
// unlinked meanwhile, in folders of up to a million entries, which is
// why 1M takes 170 s rather than ten times 100k's 2 s. Without a file
// per memory, a forget is index work and one record. The rows that measure all this
// are the scale rows of `make bench` (BENCHFLAGS='-only scale -scale
// 1k,10k,100k,1M'; -scale-against DIR runs another build in turns).
