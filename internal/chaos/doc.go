// Package chaos is walctl's randomized fault harness (issues 12 and 30):
// seeded schedules of faults against real processes — a real etcd (bin/etcd,
// from the tools module hack/etcd), a `walctl wal serve`, three `walctl
// worker run`, a `walctl master run` with the local runner starting `walctl
// catchup run` executors, producers with unique ids, and one-shot `walctl
// publish`, `table compact` and `table clean` racing the workers (every run
// compacts, cleans and fails a worker's fsync). Faults: SIGKILL and SIGSTOP/SIGCONT (past the claim
// TTL) of any process, etcd and WAL-server restarts, injected I/O errors
// (EIO/ENOSPC at the durable write, fsync and rename sites, errors at the
// publication points), a worker's failed fsync (fsync-worker: the table
// stops for the whole fleet, one-shots are refused with exit 6, and once
// that worker was restarted the operator lifts the stop with `table
// resume`), one-shots SIGKILLed at a publication, commit or removal point.
//
// Verdicts are strict (exactlyonce): only an append that failed as
// unavailable, cancelled or past its deadline may be in a table without an
// ACK, and then whole and once; a refused append never. Every Lance
// version, not only the latest, is audited with walctl's managed reader (no
// duplicate, no id dropped from one version to the next, watermarks and
// epochs never down, each ACKed batch in a version iff its position is
// within the version's watermark, no version number gone or changed but
// the oldest ones `table clean` removes); every version a process logged
// publishing (its plan) or fencing (its epoch) must be that one (a number
// two committers both won is caught); some versions are read again by
// the official LanceDB reader (exactlyonce.EnvOracleVersions), the latest
// always, and `walctl verify` must pass. A planned fault that never fired
// (an executor fault with no executor, an I/O error never injected, a
// one-shot that never reached its goal), a member that ended by itself
// without a cause, or a crash of the Go runtime in any process's stderr
// fails the run. Each run prints its figures; the test ends with the tally
// of planned faults and how many fired.
//
// `go test ./internal/chaos` (and so `make test`) runs a short schedule;
//
//	make chaos RUNS=100            # a hundred seeded runs
//	make chaos SEED=1234           # replay one run's schedule
//	make chaos EXCLUDE=stop-etcd   # leave fault kinds out (say why when you do)
//
// The package has no code of its own; see the _test.go files.
package chaos
