// Package wal is walctl's write-ahead log (DESIGN.md §2–3): tables × shards ×
// generations of Arrow record batches, with a durable publisher epoch per
// table. The Log interface is what the rest of walctl uses; *Engine is the
// in-process implementation on a local directory, and package walflight
// serves a Log over Arrow Flight and provides a client that satisfies it.
//
// # On-disk layout
//
//	<dir>/LOCK                                 dirlock: holder pid (rule 11)
//	<dir>/tables/<name>/table.json             name, shard count, created, Arrow IPC schema
//	<dir>/tables/<name>/epoch                  publisher epoch, decimal
//	<dir>/tables/<name>/shard-NNNN/trimmed     trimmed-through position, decimal
//	<dir>/tables/<name>/shard-NNNN/gen-<first>.arrows  entries as an Arrow IPC stream
//	<dir>/tables/<name>/shard-NNNN/gen-<first>.idx     index: header, one record per entry, seal record
//	<dir>/tables/<name>/shard-NNNN/new-<first>.*       a generation no sync has covered an entry of yet
//	<dir>/tables/<name>/shard-NNNN/sync-failed-<boot>  a sync failed while recovering the shard (syncfailure.go)
//	<dir>/tables/<name>/shard-NNNN/recycled-<first>.*  a trimmed generation's files, kept for reuse (recycle_gen.go)
//	<dir>/quarantine/<name>/shard-NNNN/gen-<first>-<time>/  a quarantined generation's files and AUDIT.json
//
// <first> is the 20-digit position of the generation's first entry. Counter
// files are replaced atomically (temp file, fsync, rename, fsync directory);
// a table directory is built under a temporary name and renamed into place.
// Every directory created, and every file created, renamed or removed, is
// followed by an fsync of its parent (package durable); a failed fsync is
// never retried: it stops the shard (or the table's epoch) until reopened.
//
// # Generations
//
// A generation's .arrows file is, from the start, an Arrow IPC stream: the
// table's schema message followed by one record batch message per entry.
// Sealing appends the end-of-stream marker, so a sealed generation is a
// standard stream file that arrow-go's plain ipc.NewReader (or any Arrow
// tool) reads. Entries are written in place rather than framed and converted
// at seal time so that every byte is written to disk once; that is what lets
// durable appends run close to the disk's bandwidth.
//
// The CRC32C (Castagnoli) of each entry's bytes lives beside the stream in
// the .idx sidecar, as fixed 32-byte records (each protected by its own
// CRC32C): a header (first position, schema checksum), one record per entry
// (offset, length, CRC), "synced" records (the highest position already
// durable, written with the first entry after each sync) and, once sealed, a
// seal record (final size, seal time). A generation is sealed exactly when
// its index ends with a valid seal record; the end-of-stream marker is
// durable before that record is written.
//
// # Durability and group commit
//
// An append writes its message and index record under the shard lock, then
// waits until a sync covers its position. The first waiter that finds no
// sync running fdatasyncs everything written so far, with the lock released
// so later appends keep writing: concurrent appends share one sync, and
// writing overlaps syncing. A position is returned only after that sync.
//
// When the open generation is full, the append that finds it so writes its
// end-of-stream marker, creates the next generation under temporary names
// (new-<first>.*) and carries on; the next group sync covers the closed
// generation and the new files together, after which the new generation is
// renamed to gen-<first>.* and the closed one gets its seal record; the
// sync after that makes the rename (the directory) and the seal record
// durable, and only then are the new generation's positions acknowledged.
// Rotation thus never stalls appends for extra syncs; the first entries of
// each generation wait for one more group sync. A generation's own name is
// the proof, kept outside its index, that it holds a durable entry (see
// Recovery). Positions are 1-based and dense: the next position is derived
// from the files at every open.
//
// # Recovery
//
// Open believes only what is durable (DESIGN.md §3 rule 22): whatever it
// finds and will serve — the open generation's files, a seal it completes,
// the names in every shard, table and tables directory, the epoch and
// trimmed-through counters — is synced before Open returns, because a
// process killed before its own sync leaves its writes in the page cache.
// A failed fsync in a live process leaves pages clean but never written
// (Linux), which a later open could read and sync "successfully": the
// process cuts the entries that sync covered out of its files at once
// (syncFailed), so recovery never sees them. A sync that fails during
// recovery is recorded in the shard directory, and the shard is refused by
// every later open in the same boot (syncfailure.go).
//
// Generations under temporary names were never covered by a sync: none of
// their positions was acknowledged, and they are removed (a rename a crash
// interrupted, one file renamed and the other not, is completed). Open then
// checks every generation. A generation whose index ends with a valid seal
// record must be intact: any mismatch is damage. A generation without one
// has every entry's checksum verified. If its stream is complete (entries
// and end-of-stream marker) its seal is finished — its data synced, then
// the seal record written: the record, written after the sync that covered
// the rotation, was lost, torn, zeroed or garbled by a crash (at most its
// last index record may be unreadable). Otherwise the first invalid entry
// starts a torn tail that is cut off, together with any generation after
// it: none of that was acknowledged, because an acknowledgement follows a
// sync covering the entry and, after a rotation, the closed generation's
// whole stream. A synced record vouching for a position in the tail, a
// sealed later generation, or the generation's own name (its first entry)
// proves otherwise; then it is damage. Cutting entries the index recorded
// is logged at error level (a torn write and damage to the last entries
// look alike). A last generation whose header or schema prefix is invalid
// is removed only when provably empty (provablyEmpty); a missing or cut
// index beside its data, a damaged header, a missing data file or a file
// that cannot be read is damage, never an unfinished creation.
//
// Damage is contained (DESIGN.md §3 rule 18): it becomes a hole in its
// shard (Damage lists it, naming file, byte and position). The shard serves
// positions before it; reads and trims reaching it fail with
// ErrCorruptEntry; appends go on when the shard's end is known (intact
// generations follow, or the damaged one is sealed with an intact index)
// and are refused otherwise. Other shards and tables are unaffected.
// Nothing is repaired: Quarantine moves a damaged generation aside with an
// audit record, after which its positions stay unreadable and are never
// issued again. Reads verify each entry's checksum again.
//
// A read decodes each entry in place: the record's buffers point into the
// bytes read from the file. A caller that releases what it reads (such as
// publication) marks its context with RecycleBuffers and gets those bytes
// in recycled buffers, handed back when the record's last reference is
// released (recycle.go).
//
// # Epoch and trim
//
// AdvanceEpoch is a compare-and-swap under a per-table lock, made durable
// before it returns. Trim checks the epoch under the same lock, records the
// new trimmed-through position durably, then, in the background (Close
// waits), keeps the files of up to Options.RecycledGenerations of the
// generations wholly at or below it for the next generations to be written
// over (recycle_gen.go) and deletes the others; an Open after a crash
// deletes any leftovers of trimmed generations.
package wal
