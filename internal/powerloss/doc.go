// Package powerloss runs the real `walctl wal serve` and `walctl worker run`
// over a file system that forgets what was never made durable
// (internal/testutil/powerfs), cuts the power at random points — a random
// moment, right after an ACK, or with the worker paused at a failpoint of
// the publication path (plan pin, files prepared, descriptor recorded,
// epoch advanced, manifest link, commit, trim, or any durable file-system
// operation) — rebuilds the surviving tree, restarts everything on it and
// checks, after every cut, that no ACKed WAL position and no table version
// the WAL was trimmed against is gone, and at the end of each run that the
// official LanceDB reader and `walctl verify` find every ACKed id exactly
// once and no un-ACKed batch half visible.
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
// It needs /dev/fuse and root, and fails (never skips) without them.
package powerloss
