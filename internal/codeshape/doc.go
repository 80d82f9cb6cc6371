// Package codeshape holds tests of the source tree's shape that no
// compiler checks: today, that no function outside tests and generated
// code is over MaxFuncLines lines (issue 14). It has no code of its own.
package codeshape

// MaxFuncLines is the longest a function outside tests and generated code
// may be, counted from its func keyword to its closing brace.
const MaxFuncLines = 80
