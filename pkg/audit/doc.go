// Package audit is the tamper-evident, append-only, durable audit log of
// oxiosd: every syscall that changes anything, every denial and every
// lifecycle event becomes one entry, and each entry is chained to the one
// before it by a BLAKE3 hash.
//
// # Use
//
// The kernel's single committer appends a batch with [Log.Append] (written,
// not yet durable), makes it durable with one [Log.Sync] (one fdatasync for
// the whole batch: group commit) and only then replies ok. [Log.Scan] and
// [Log.Changed] serve `ox-audit log` and `ox-audit tail` without polling;
// [Log.Show], [Log.SyncedHead] and [Log.VerifySynced] serve `ox-audit
// show`, `head` and `verify` against the live log.
// [Verify] checks a log directory offline (no daemon needed), [Log.Export]
// writes a self-contained copy that [VerifyFile] checks anywhere.
//
// # Format
//
// A log is a directory:
//
//	DIR/seg-0000000000000001.jsonl   entries 1..n, one JSON line each
//	DIR/seg-<first seq, 16 digits>.jsonl
//	DIR/head                         the last durable entry (seq, hash, where)
//
// An entry line is the JSON of [Entry], fields in struct order, produced by
// this package only (never by encoding/json), for example:
//
//	{"type":"audit","seq":7,"time":"2025-06-01T12:00:00.000000000Z","actor":{"uid":1000,"pid":4242,"agent":"ops"},"op":"state.save","target":"ops:notes/today.md","args":"<64 hex>","result":"ok","prev":"<64 hex>","hash":"<64 hex>"}
//
// The line is laid out so that verification needs no JSON parser: it starts
// with the fixed prefix {"type":"audit","seq": followed by the decimal seq,
// and it ends with ,"prev":"<64 hex>","hash":"<64 hex>"} at fixed offsets
// from the end. The body is every byte before ,"hash":" and
//
//	hash = BLAKE3-256(prev as 32 raw bytes || body)
//
// so any changed byte, formatting included, changes the hash. The first
// entry's prev is 64 zeros. Segments rotate at [Options.SegmentBytes] (a
// batch is never split); a finished segment is fdatasynced and made
// read-only (0400) before the next one is created, so only the last segment
// can ever end in a torn write.
//
// The head file holds two fixed-size slots, each one JSON line padded with
// spaces and carrying its own checksum, written alternately with pwrite
// after every Sync (see head.go for why this is enough without fsync).
//
// # Threat model
//
// The chain proves that entries were neither changed, removed, reordered nor
// inserted, to anyone who holds a head (seq and hash) recorded earlier and
// kept out of the attacker's reach. Against the local head file alone, a
// tail cut off or a suffix re-hashed from some entry onwards is detected only
// if the attacker did not also rewrite the head: the root user of the
// machine can rewrite both. The head therefore leaves the machine: exports
// end with it, and commits of the state repository carry it as a trailer, so
// a rewritten log no longer matches the heads recorded there. The log is
// append-only for everyone, the admin included: this package has no call
// that rewrites or deletes an entry; the only truncation it ever does is
// [Open] cutting a torn tail that was never synced, so never acknowledged.
//
// # Durability
//
// An entry is durable once the Sync that follows its Append returns nil:
// the data of the segment is fdatasynced, and a new segment's directory
// entry is fsynced when the segment is created. After a crash (kill -9 or
// power loss) [Open] keeps every synced entry and cuts back a torn or
// unsynced tail, reporting what it cut in [Log.Recovered]. A write that
// fails is cut back and reported, and the log goes on; after a failed
// fdatasync (or a failed write that cannot be cut back) the Log refuses
// further work with [ErrBroken]: what reached the disk is unknown, so the
// daemon must restart, and Open recovers.
//
// # Reading
//
// [Log.Read] serves an audit.log call: the entries a [Filter] selects and
// the caller may see, the last N of them, then, following, each group as
// it is published. What a caller may see is the kernel's to judge.
// [Log.Line] serves audit.show (one entry), [Log.ExportLines] audit.export.
package audit
