// Package hostile runs a real `walctl wal serve` against hostile Flight
// producers (issue 30): raw DoPut streams of a few hundred bytes whose
// compressed bodies or view columns declare gigabytes must be refused as
// invalid while the server, and its other streams, go on serving.
package hostile
