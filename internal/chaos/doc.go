// Package chaos is walctl's randomized fault harness (issue 12): seeded
// schedules of faults against real processes — a real etcd (bin/etcd, from
// the tools module hack/etcd), a `walctl wal serve`, three `walctl worker
// run`, a `walctl master run` with the local runner starting `walctl catchup
// run` executors, producers with unique ids and one-shot `walctl publish`
// racing the workers. Faults: SIGKILL and SIGSTOP/SIGCONT (past the claim
// TTL) of any process, etcd and WAL-server restarts, injected I/O errors
// (EIO/ENOSPC at the durable write, fsync and rename sites, errors at the
// publication points). After each run every ACKed id must be in its table
// exactly once (official LanceDB reader and `walctl verify`), no id that was
// never appended may appear, and the epochs of the Lance commits never
// decrease.
//
// `go test ./internal/chaos` (and so `make test`) runs a short schedule;
//
//	make chaos RUNS=100            # a hundred seeded runs
//	make chaos SEED=1234           # replay one run's schedule
//	make chaos EXCLUDE=stop-etcd   # leave fault kinds out (say why when you do)
//
// The package has no code of its own; see the _test.go files.
package chaos
