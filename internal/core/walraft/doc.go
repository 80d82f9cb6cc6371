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
// # The raft log: a segment store of our own
//
// The raft log lives in <dir>/raft/log (logstore.go): append-only 64 MiB
// segments of CRC32C-framed entries, each StoreLogs batch written (in 1 MiB
// pieces: writeback.WriteAt) and fdatasynced once before it returns (so a
// follower acknowledges, and the leader counts itself, only for entries on
// disk), offsets rebuilt by a
// scan on open (a torn tail of the newest segment is cut, damage anywhere
// else refused), a cleared suffix truncated, compaction by whole segments.
// Term and vote live in a small CRC-checked file replaced atomically
// (stable.go). It replaced a bbolt store (copy-on-write pages: 2.3-3.2
// bytes written per ACKed byte per replica) and, before that,
// hashicorp/raft-wal v0.4.0, which panics on the next open after raft
// clears a log suffix (raft-wal issue #31; TestReopenAfterLogSuffixCleared).
// A directory holding either older log is refused (ErrOldRaftLog).
//
// The applied engine is still synced on every applied batch, so each
// ACKed byte is written twice per replica (raft log + engine). Deferring
// the engine's sync to the raft log (one fsync per batch) was built and
// withdrawn: a nine-replica leader-kill test lost an ACKed entry once
// with it, cause not found.
//
// # Layout of a replica directory
//
//	identity.json   group, name and id (name + random suffix, created on
//	                the first start of an empty directory, never changed)
//	raft/log/       raft log segments; raft/stable: term and vote
//	snapshots/      raft snapshots (FileSnapshotStore, two retained)
//	wal/            the applied engine (package wal's layout)
//	applied         the FSM's progress record (two CRC-protected 16 KiB slots)
//
// # Applying exactly once
//
// hashicorp/raft replays the log after the last snapshot on every start
// (NoSnapshotRestoreOnStart is set: the engine is durable and is not
// rebuilt from the snapshot). The FSM applies one command at a time: it
// first writes, durably, "command i is next; the state it touches has
// fingerprint F" (last generation and position of the shard, or the
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
// An append is logged as the entry the engine stores (opAppendEntry): the
// leader validates and encodes the record once (wal.Engine.Encode) and
// every replica, the leader included, hands those bytes to its engine
// (wal.Engine.AppendEncoded), which checks them in place — one record batch
// message of the table's schema, arrays valid — without decoding and
// encoding the record again. Appends logged by earlier versions (opAppend,
// an Arrow IPC stream of the record) are still applied. A replica of an
// earlier version stops applying (never skips) at the first opAppendEntry,
// an unknown command to it: upgrade a group's followers first and its
// leader last (walctl wal transfer-leader), and never downgrade.
//
// Consecutive committed appends are applied as a run (BatchingFSM): one
// progress record naming the run's raft entries and each shard's last
// position before it, then each shard's appends in log order through
// wal.Engine.AppendBatch (one sync per shard, shards in parallel). The
// engine keeps a prefix of each shard's appends after a crash, so the next
// open finishes the run from the raft log before raft starts: per shard,
// the first (last position − position before) valid appends landed and are
// skipped; the rest are applied. A generation the engine closes by size in
// the middle of a run records the run's time as its seal time; explicit
// seals (Seal, age) always record the proposing leader's time.
//
// Every ACKed byte is written twice per replica: once in the raft log, once
// in the engine's generation files (plus a small progress record per run or
// command). Each applied batch costs the replica a raft-log fdatasync, a
// progress-record fdatasync (its slots are rewritten in place: no journal
// commit for a timestamp) and the engine's sync. The engine's files are
// what publication reads, seals and trims;
// making the raft log the data log would need the engine to serve reads
// from the raft log and trims to drive log compaction — later work, and
// worth it for disk wear and space rather than speed. Measured on the
// 2-core development VM (bench wal --replicas 3, 16 producers, three
// alternating rounds), a throw-away build that skipped the engine's writes
// altogether (1.03 bytes written per ACKed byte) ACKed 139 MiB/s against
// 120 MiB/s, and one with no fdatasync anywhere reached 0.29-0.33 of dd:
// the disk is not what bounds a group on one machine. Each append waits
// through a chain of stages (the leader's log write, which hashicorp/raft
// finishes before sending; a follower's receive and log write; the
// leader's apply), none more than ~60% busy, while the machine's two
// CPUs are 83-89% busy and idle 0-2% of a run (/proc/stat; the rest is
// I/O wait): a group of three on one 2-core machine is bound by CPU. hack/raftceiling measures the bare
// libraries on a machine, with no walctl code; here (disk efficiency,
// medians of three rounds, 16 producers of 1 MiB entries):
// go.etcd.io/raft, whose leader writes while it sends, 0.53 with messages
// handed over in memory (six rounds), 0.39 over loopback TCP, 0.34 over mutual TLS,
// 0.26 over TCP and 0.23 over mutual TLS with a second durable write of
// committed entries before the answer (what this package does);
// hashicorp/raft over its TCP transport, one write, 0.44. No library
// reaches 0.5 here once its replicas talk over a socket, so replacing
// hashicorp/raft would not either; this package's groups (0.28, mutual TLS,
// two writes, separate processes, a client hop) already exceed the bare
// go.etcd.io/raft with the same transport and writes.
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
// What a replica knows to be committed may be behind the group: a follower
// that restarted or lags, even a new leader before the no-op of its term
// commits. So a read that says what exists (tables, generations, epoch,
// stats, a read to the last position) is linearizable only through
// LinearizableRead: on the leader, a raft barrier (committed by a quorum
// in the current term, applied here with everything before it) precedes
// the read; a follower refuses with *NotLeaderError. The group client asks
// for it on every such read; a read of an explicit range may go to any
// replica, which fails with wal.ErrBeyondEnd where it has not applied.
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
// entries behind it (bbolt reuses the freed pages). A trim that removes a generation while a snapshot is
// being streamed fails that snapshot (ErrTrimmed); raft takes the next one
// later.
//
// # Spreading a hot table (later)
//
// A table lives in one group. Spreading its shards over groups would keep
// the epoch and the trims in a home group that every other group's trim
// consults; not built.
package walraft
