// Package walraft replicates the WAL (DESIGN.md §6): a group of 3 or 5
// replicas, each a *Node satisfying wal.Log, agree through Raft on every
// state change — table registration, append, seal, publisher-epoch CAS,
// trim — and apply them, in log order, to the single-directory engine
// (package wal) in <dir>/wal.
//
// # Why hashicorp/raft
//
// Consensus comes from a library, not from this package. hashicorp/raft
// (v1.8.0) gives, ready and long exercised in Consul and Nomad: non-voters
// (a new replica catches up before it may vote), snapshots streamed over
// the transport (InstallSnapshot; never loaded whole in memory), leadership
// transfer, a pluggable StreamLayer (mutual TLS and a group handshake here),
// a leader lease (a leader cut off from its quorum steps down and cannot
// commit), and futures that separate "never proposed" (ErrNotLeader) from
// "proposed, outcome unknown" (ErrLeadershipLost). go.etcd.io/raft would
// leave transport, storage, snapshots and the proposal pipeline to us.
//
// # The raft log: segment files
//
// The raft log is ours (logstore.go): append-only segment files in
// <dir>/raft/log, CRC-framed entries, one write and one fdatasync per
// StoreLogs batch, before it returns, so a follower acknowledges and the
// leader counts itself only for entries on disk, and an entry is ACKed
// only when a quorum has it on disk. Each entry's bytes are written once.
// Offsets live in memory, rebuilt by a scan on open that cuts a torn tail
// of the newest segment; a cleared suffix (a deposed leader's tail) is a
// truncation, a compaction removes whole segments. Term and vote live in
// a small CRC-checked file replaced atomically (stable.go). The newest
// entries are also kept in memory (raft.LogCache) to feed followers.
//
// Two stores came before it. hashicorp/raft-wal v0.4.0 panics on the next
// open after raft clears a log suffix ("sealed segment has no index
// block", raft-wal issue #31; fixed only in v0.4.1, not available here);
// TestReopenAfterLogSuffixCleared reproduces that. bbolt (the design of
// raft-boltdb/v2, which cannot be linked beside raft v1.8.0: it imports
// go-metrics/compat) cost two fsyncs per batch (data, then meta page) and
// rewrote B+tree pages: 3.2 bytes written per ACKed byte per replica with
// one producer. A directory holding either store's files is refused
// (ErrOldRaftLog).
//
// # Layout of a replica directory
//
//	identity.json   group, name and id (name + random suffix, created on
//	                the first start of an empty directory, never changed)
//	raft/log/       raft log segments (<first index>.seg)
//	raft/stable     raft's term and vote, the log's compacted-through index
//	snapshots/      raft snapshots (FileSnapshotStore, two retained)
//	wal/            the applied engine (package wal's layout)
//	applied         the FSM's progress record (two CRC-protected 16 KiB slots)
//
// # Applying exactly once
//
// hashicorp/raft replays the log after the last snapshot on every start
// (NoSnapshotRestoreOnStart is set: the engine is durable at every
// snapshot and is not rebuilt from it). Commands other than appends are
// applied one at a time: the FSM first writes, durably, "command i is
// next; the state it touches has fingerprint F" (last generation and position of the shard, or the
// table's epoch), then applies it through the engine, whose every mutation
// is durable when it returns. After a restart, commands below i are
// skipped; command i is applied again only if the fingerprint is unchanged
// (create and trim are idempotent and simply re-applied). Positions,
// generation boundaries, epochs and trims are therefore a function of the
// log alone: positions are assigned by the engine in log order; the size
// limit of a generation (MaxGenerationBytes) must be equal on all replicas
// and the peer handshake refuses a peer where it differs; age sealing is
// never a local timer: only the leader notices an old open generation and
// proposes a Seal; seal and creation times are the proposing leader's
// clock, carried in the command.
//
// # One fsync per batch per replica
//
// Committed appends are written to the engine without a sync
// (wal.Engine.AppendBatchUnsynced): the raft log, fsynced before this
// replica acknowledged them, is their durable copy, and the open path redoes
// whatever the engine lost (deferred.go). The appends since the last
// checkpoint form a deferral; before the first append of a shard new to it
// is written, the progress record names the deferral's first raft index and
// the shard's last position before it (one record fsync per shard per
// deferral, not per batch). After a crash the engine keeps a prefix of each
// shard's appends (recovery cuts a torn tail); raft replays the log from
// the deferral's start, the first (last position − position before)
// appends of each shard are skipped as landed and the rest applied.
//
// A checkpoint syncs the engine and settles the record: before any other
// command (seal, epoch CAS, trim, create: each is then applied with its
// fingerprinted intent record as above), before a snapshot — raft compacts
// its log only behind a snapshot, so it never deletes an entry whose
// effects are not durable in the engine — and at close. Reads sync the
// engine first (it shows only durable entries). A generation the engine
// closes by size records the time of the append that closed it (its
// command's time), the same on every replica.
//
// Cost, measured (fsync and fdatasync calls counted by strace over
// BenchmarkAppend, three replicas in one process, 64 KiB appends, the
// difference of a 300- and a 100-append run): per ACKed append per
// replica 1.2 with one producer (bbolt and a synced apply path: 5.3) and
// 0.32 with sixteen (0.89): one raft-log fdatasync per batch on the ACK
// path, the engine's syncs amortised over its generations. Bytes written
// per ACKed byte per replica (/proc write_bytes): 2.15 with one producer
// (bbolt: 3.2), 2.08 with sixteen; 2.01 with `walctl bench wal --replicas
// 3` (1 MiB entries). Every byte is still written twice, once in the raft
// log and once in the engine's generation files (written back by the
// kernel, synced later). The engine's files are what publication reads,
// seals and trims; writing each byte once would need the engine to serve
// reads from the raft log and trims to drive log compaction — later work.
//
// # Mutations, leaders and ambiguity
//
// A mutation on a non-leader fails with *NotLeaderError (ErrNotLeader)
// before anything enters the log: retrying it on the leader is safe. A
// mutation that entered the log but whose commit this leader could not
// confirm (leadership lost, shutdown, the caller's deadline) fails with
// ErrOutcomeUnknown (errs.ErrUnavailable): it may or may not be committed
// and is never retried blindly; appends are reported to the producer as
// unknown, other commands are resolved by reading state back (as wal.Log
// documents). A failure to apply a committed command for a local reason
// (a failed fsync) stops this replica applying (never skipping the
// command); a restart resumes from the progress record.
//
// # Reads
//
// Reads are served from this replica's applied engine, only when it has
// applied everything it knows to be committed and has heard from a group
// at all (else ErrBehind); a position it has not applied fails with
// wal.ErrBeyondEnd — never partial data.
//
// # Membership
//
// A replica on an empty directory gets a new id and starts with no
// configuration: it never campaigns or counts as a voter. The leader adds
// it as a non-voter (AddReplica), waits until it has applied what the
// leader had logged, then promotes it. A wiped replica restarted under the
// same name has a new id, so the old voter id it replaces is never
// impersonated by a blank disk. Bootstrap only acts on an empty directory.
//
// # Snapshots
//
// A snapshot is a header (tables, schemas, epochs, trimmed-through
// positions, generation boundaries and seal times) followed by every
// untrimmed entry, streamed from the engine one at a time. Restore builds
// the state in <dir>/wal.restore through the engine's API, then swaps it in
// with durable renames. A restore killed midway leaves a directory that the
// next open removes or undoes, and the next open re-installs the newest
// snapshot from the snapshot store whenever it is newer than the engine's
// progress record, so an install always runs to completion.
//
// Costs and limits: a snapshot is taken every SnapshotThreshold raft
// entries and copies every untrimmed entry into the snapshot store (a third
// write of data that is still unpublished); the raft log keeps TrailingLogs
// entries behind it. A trim that removes a generation while a snapshot is
// being streamed fails that snapshot (ErrTrimmed); raft takes the next one
// later.
//
// # Spreading a hot table (later)
//
// A table lives in one group. Spreading its shards over groups would keep
// the epoch and the trims in a home group that every other group's trim
// consults; not built.
package walraft
