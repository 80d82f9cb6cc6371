// Package oracletest holds the test helpers of the official LanceDB oracle.
// It imports testing, so only tests import it; the shipped binary reaches
// the oracle through package oracle alone (`walctl bench lance`).
package oracletest

import (
	"testing"

	"github.com/walctl/walctl/internal/core/lance/oracle"
)

// MustFind returns the oracle or fails the test (never skips it).
func MustFind(t testing.TB) *oracle.Oracle {
	t.Helper()
	o, err := oracle.Find()
	if err != nil {
		t.Fatal(err)
	}
	return o
}
