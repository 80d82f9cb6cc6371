// Package e2e holds walctl's real-process acceptance tests (issue 5): a real
// embedded etcd, a `walctl wal serve` process, a producer appending through
// the Flight client, and walctl processes paused, stopped and killed at named
// failpoints. Every test checks exactly once with the official LanceDB
// reader. The package has no code of its own; see the _test.go files.
package e2e
