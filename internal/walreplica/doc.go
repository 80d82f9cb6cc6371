// Package walreplica holds the acceptance tests of the replicated WAL
// (issue 15, DESIGN.md §6) with real processes: `walctl wal serve` replicas
// in Raft groups over loopback TCP with mutual TLS, real disks, a real etcd
// for placement, producers using the group client, `walctl publish` and
// `walctl verify`, and the official LanceDB reader for payloads.
//
// WALCTL_REPLICA_BYTES sets how much is ACKed before the all-replicas crash
// (default 8 MiB, to share the machine); `make qualify-replicated` runs the
// full 192 MiB.
package walreplica
