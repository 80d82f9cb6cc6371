// Package catchupe2e holds the end-to-end test of catch-up on the embedded
// default (issue 7): a real `walctl master run` with the local process
// runner, a large backlog and a live producer appending through the WAL's
// Flight API throughout, a catch-up admitted through the master's HTTP API
// and executed by a `walctl catchup run` child process, and conservation
// checked with the official LanceDB reader. The package has no code of its
// own; see the _test.go files.
package catchupe2e
