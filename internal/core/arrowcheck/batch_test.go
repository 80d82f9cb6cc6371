package arrowcheck_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/walctl/walctl/internal/core/arrowcheck"
	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
	"github.com/walctl/walctl/internal/core/errs"
)

// decode reads the single batch of an IPC stream; a stream arrow-go's
// reader refuses gives a nil batch and the reader's error.
func decode(t testing.TB, stream []byte) (arrow.RecordBatch, error) {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		return nil, fmt.Errorf("no batch: %v", r.Err())
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

func TestValidFixturePasses(t *testing.T) {
	rec, err := decode(t, arrowchecktest.Valid())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if err := arrowcheck.Batch(arrowchecktest.Schema(), rec); err != nil {
		t.Fatalf("valid fixture refused: %v", err)
	}
	schema, stream := arrowchecktest.AllTypes()
	if err := arrowcheck.Schema(schema); err != nil {
		t.Fatalf("every-type schema refused: %v", err)
	}
	all, err := decode(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Release()
	if err := arrowcheck.Batch(schema, all); err != nil {
		t.Fatalf("every-type batch refused: %v", err)
	}
}

// TestBadStreams: each stream breaks one rule; the batch is refused with the
// rule's sentinel, naming the column and row. Streams that arrow-go's own
// reader refuses never reach the validator.
func TestBadStreams(t *testing.T) {
	for _, c := range arrowchecktest.Cases() {
		t.Run(c.Rule, func(t *testing.T) {
			rec, err := decode(t, c.Stream)
			if c.Decoder {
				if err == nil {
					rec.Release()
					t.Fatalf("arrow-go decoded the stream; the case must move to the validator")
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			defer rec.Release()
			err = arrowcheck.Batch(arrowchecktest.Schema(), rec)
			CheckRefusal(t, err, c)
			if !errors.Is(err, c.Want) {
				t.Fatalf("got %v, want %v", err, c.Want)
			}
			var ae *arrowcheck.Error
			if !errors.As(err, &ae) || ae.Column != c.Column || ae.Row != c.Row {
				t.Fatalf("got %#v, want column %q row %d", ae, c.Column, c.Row)
			}
		})
	}
}

// CheckRefusal asserts err is an ErrInvalid naming the case's column and row.
func CheckRefusal(t *testing.T, err error, c arrowchecktest.Case) {
	t.Helper()
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("got %v, want an errs.ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("column %q", c.Column)) {
		t.Fatalf("error %q does not name column %q", err, c.Column)
	}
	if c.Row >= 0 && !strings.Contains(err.Error(), fmt.Sprintf("row %d", c.Row)) {
		t.Fatalf("error %q does not name row %d", err, c.Row)
	}
}
