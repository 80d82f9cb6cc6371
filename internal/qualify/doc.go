// Package qualify holds the recovery qualification of publication (issue 6,
// after the second seed note): real `walctl wal serve` and `walctl worker
// run` processes publish a backlog of ACKed but unpublished entries, every
// one of them is killed with SIGKILL mid-publication, the original
// directories are reopened, one `walctl publish --all` completes, and the
// table is checked by the official LanceDB reader (full payload), by row
// counts, by walctl's read-only reader and by `walctl verify` — which must
// also fail on a deliberately altered copy. No producer replays anything.
// Both preparation modes are qualified.
//
// The test suite runs it on 64 MiB. The qualification run uses 192 MiB:
//
//	make qualify                       # WALCTL_QUALIFY_BYTES=192MiB
//	WALCTL_QUALIFY_BYTES=1GiB go test -count=1 -timeout 60m ./internal/qualify
package qualify
