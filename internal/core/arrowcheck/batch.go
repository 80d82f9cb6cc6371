// Package arrowcheck validates Arrow record batches and schemas before the
// WAL accepts them (DESIGN.md rule 17: nothing malformed is ACKed).
//
// Batch checks a decoded record batch against a table schema: exact field
// names, types and nullability, then every buffer of every column, nested
// children included — validity bitmaps and null counts, fixed-width buffer
// lengths, offsets in range and monotonic, UTF-8 of utf8 columns,
// fixed-size-list child lengths. A refusal is an *Error naming the column and
// the row. Types walctl does not store are handed to arrow-go's
// array.ValidateFull, which checks the same rules without naming a row.
//
// Schema checks a table schema before it is registered: field names, types
// walctl's Lance writer can store, widths and time zones.
package arrowcheck

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/errs"
)

// Sentinel errors; both are in the errs.ErrInvalid category (exit 2).
var (
	// ErrMalformed marks a record batch whose buffers are inconsistent: an
	// offset out of range, a short buffer, a null count that disagrees with
	// the validity bitmap, invalid UTF-8 in a utf8 column.
	ErrMalformed = fmt.Errorf("malformed record batch: %w", errs.ErrInvalid)
	// ErrSchema marks a record batch that is well formed but does not fit the
	// table schema: a field name, type or nullability differs, or a
	// non-nullable column holds a null.
	ErrSchema = fmt.Errorf("record batch does not fit the table schema: %w", errs.ErrInvalid)
	// ErrBadSchema marks a table schema walctl refuses to register.
	ErrBadSchema = fmt.Errorf("invalid table schema: %w", errs.ErrInvalid)
)

// Error is a refused batch: the column (a dotted path for nested children),
// the row of the batch (-1 when the fault is not in one row) and what is
// wrong. It unwraps to ErrMalformed or ErrSchema.
type Error struct {
	Column string
	Row    int
	// Where locates the fault inside the row ("item 3" of a fixed-size
	// list, "element 2" of a list), or is empty.
	Where  string
	Reason string
	kind   error
}

// Error names column, row and reason, then the sentinel.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "column %q", e.Column)
	if e.Row >= 0 {
		fmt.Fprintf(&b, " row %d", e.Row)
	}
	if e.Where != "" {
		b.WriteString(" " + e.Where)
	}
	fmt.Fprintf(&b, ": %s: %v", e.Reason, e.kind)
	return b.String()
}

// Unwrap returns ErrMalformed or ErrSchema.
func (e *Error) Unwrap() error { return e.kind }

// panicReason starts the reason of a refusal that comes from a recovered
// panic: a rule Batch does not check before touching the data (the fuzz
// target treats it as a bug).
const panicReason = "validator panic"

// Batch validates rec fully against schema. It reads every offset and every
// utf8 value (O(size of the batch)) and allocates nothing per row. A nil
// error means the batch can be encoded, stored and published as is; a
// refusal is an *Error. Batch never panics: a fault it did not foresee is
// reported as ErrMalformed.
func Batch(schema *arrow.Schema, rec arrow.RecordBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Column: "?", Row: -1, Reason: fmt.Sprintf("%s: %v", panicReason, r), kind: ErrMalformed}
		}
	}()
	if rec == nil {
		return &Error{Column: "", Row: -1, Reason: "no record batch", kind: ErrMalformed}
	}
	if err := fieldsMatch(schema, rec); err != nil {
		return err
	}
	rows := rec.NumRows()
	for i, f := range schema.Fields() {
		col := rec.Column(i)
		if col == nil || col.Data() == nil {
			return &Error{Column: f.Name, Row: -1, Reason: "column has no data", kind: ErrMalformed}
		}
		if int64(col.Len()) != rows {
			return &Error{Column: f.Name, Row: -1, Reason: fmt.Sprintf("column has %d rows, the batch %d", col.Len(), rows), kind: ErrMalformed}
		}
		c := checker{path: f.Name, loc: topRow}
		if err := c.array(col.Data(), f.Type, f.Nullable); err != nil {
			return err
		}
	}
	return nil
}

// fieldsMatch compares rec's schema with the table's: names, types and
// nullability, field by field (metadata is ignored).
func fieldsMatch(schema *arrow.Schema, rec arrow.RecordBatch) error {
	want, got := schema.Fields(), rec.Schema().Fields()
	if int(rec.NumCols()) != len(got) {
		return &Error{Column: "", Row: -1, Reason: fmt.Sprintf("batch has %d columns but its schema %d fields", rec.NumCols(), len(got)), kind: ErrMalformed}
	}
	for i := 0; i < len(want) && i < len(got); i++ {
		w, g := want[i], got[i]
		switch {
		case w.Name != g.Name:
			return &Error{Column: w.Name, Row: -1, Reason: fmt.Sprintf("field %d is named %q", i, g.Name), kind: ErrSchema}
		case !arrow.TypeEqual(w.Type, g.Type):
			return &Error{Column: w.Name, Row: -1, Reason: fmt.Sprintf("type is %s, the table's %s", g.Type, w.Type), kind: ErrSchema}
		case w.Nullable != g.Nullable:
			return &Error{Column: w.Name, Row: -1, Reason: fmt.Sprintf("nullable is %t, the table's %t", g.Nullable, w.Nullable), kind: ErrSchema}
		}
	}
	switch {
	case len(got) > len(want):
		return &Error{Column: got[len(want)].Name, Row: -1, Reason: fmt.Sprintf("not a field of the table (it has %d)", len(want)), kind: ErrSchema}
	case len(got) < len(want):
		return &Error{Column: want[len(got)].Name, Row: -1, Reason: "missing from the batch", kind: ErrSchema}
	}
	return nil
}
