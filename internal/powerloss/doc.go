// Package powerloss runs the real `walctl wal serve` and `walctl worker run`
// over a file system that forgets what was never made durable
// (internal/testutil/powerfs) and cuts the power after scripted sequences
// of faults (sequences_test.go). Simple ones: a random moment, right after
// an ACK, the worker paused at a failpoint of the publication path, a
// restarted idle WAL server paused at a durable operation. Compound ones
// chain faults before the cut: the WAL server SIGKILLed under load and
// restarted (perhaps paused on the way), then a publication; a cut, a
// restart paused in recovery, a cut there; a cut, a restart with an
// injected I/O error, another server taking over; an fsync failed by the
// file system with Linux's semantics under the WAL server or the worker,
// another process taking over; `table compact` or `table clean` paused
// mid-way. Every planned fault must fire, or the run fails.
//
// After every cut, on the restarted server: every ACKed position above the
// trimmed point still holds the batch it was ACKed with (none gone, none
// reissued), no trimmed point or latest watermark went back, no shard is
// trimmed past the latest watermark, and every Lance version passes the
// audit (exactlyonce) and is, number for number, what it was at the last
// look (only `table clean` removes versions, the oldest). At the end of
// each run the official LanceDB reader finds every ACKed id exactly once,
// no refused or never-appended id and no append of unknown outcome half
// visible; some versions are read again by it; `walctl verify` passes.
//
// The WAL directory and the worker's data directory (with its Lance root)
// are on the mount; etcd runs in the test process on the ordinary disk: it
// stands for the coordination cluster, which a machine's power loss does not
// take down, and it is not what is tested.
//
// `go test` runs a few cuts; `make powerloss CUTS=200` runs more:
//
//	WALCTL_POWERLOSS_CUTS=200 WALCTL_POWERLOSS_SEED=7 go test -count=1 -v -timeout 60m ./internal/powerloss
//
// WALCTL_POWERLOSS_COMPOUND sets the share of compound sequences (percent,
// default 60). It needs /dev/fuse and root, and fails (never skips) without
// them.
package powerloss
