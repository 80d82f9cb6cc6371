package arrowcheck

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones are validated the same way on hosts without zoneinfo
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/lance/lancefile"
)

// Limits on widths a table schema may declare. Arrow stores them as int32;
// walctl keeps them far lower so that one row stays well inside one WAL
// entry and one Lance page: 65,536 float32 items are 256 KiB per row (the
// largest embedding models use 4,096 to 8,192 dimensions).
const (
	// MaxFixedSizeListLen is the largest N of fixed_size_list<T>[N].
	MaxFixedSizeListLen = 1 << 16
	// MaxFixedSizeBinaryWidth is the largest N of fixed_size_binary[N].
	MaxFixedSizeBinaryWidth = 1 << 16
)

// Schema checks a table schema before it is registered: at least one
// field; names that are valid UTF-8 without control characters (C0, DEL,
// C1, line and paragraph separators, bidirectional overrides) and unique
// without regard to case (Lance resolves column names case-insensitively
// in places); types walctl's Lance writer stores; widths within the limits
// above; time zones that are IANA names or UTC offsets. Errors wrap
// ErrBadSchema and name the field.
func Schema(s *arrow.Schema) error {
	if s == nil || s.NumFields() == 0 {
		return fmt.Errorf("schema has no fields: %w", ErrBadSchema)
	}
	seen := make(map[string]string, s.NumFields())
	for i, f := range s.Fields() {
		if err := FieldName(f.Name); err != nil {
			return fmt.Errorf("field %d: %w", i, err)
		}
		key := foldKey(f.Name)
		if prev, ok := seen[key]; ok {
			if prev == f.Name {
				return fmt.Errorf("field %q appears twice: %w", f.Name, ErrBadSchema)
			}
			return fmt.Errorf("fields %q and %q differ only in case, which Lance does not tell apart: %w", prev, f.Name, ErrBadSchema)
		}
		seen[key] = f.Name
		if err := fieldType(f.Type); err != nil {
			return fmt.Errorf("field %q: %w", f.Name, err)
		}
	}
	return nil
}

// FieldName refuses an empty name, invalid UTF-8 and control characters.
func FieldName(name string) error {
	if name == "" {
		return fmt.Errorf("field without a name: %w", ErrBadSchema)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("field name %q is not valid UTF-8: %w", name, ErrBadSchema)
	}
	for i, r := range name {
		if isControl(r) {
			return fmt.Errorf("field name %q has control character %U at byte %d: %w", name, r, i, ErrBadSchema)
		}
	}
	return nil
}

// isControl reports characters that must not appear in a name because a
// terminal or an editor would act on them instead of showing them.
func isControl(r rune) bool {
	switch {
	case unicode.IsControl(r), r == '\u2028', r == '\u2029':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069': // bidi embeddings, overrides, isolates
		return true
	}
	return false
}

// foldKey maps a name to the same key as every name that differs from it
// only in case (Unicode simple folding).
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}

// SameFold reports whether a and b differ only in case.
func SameFold(a, b string) bool { return foldKey(a) == foldKey(b) }

// fieldType checks widths and time zones, then that the Lance writer can
// store the type.
func fieldType(t arrow.DataType) error {
	switch tt := t.(type) {
	case *arrow.FixedSizeListType:
		if n := tt.Len(); n <= 0 || n > MaxFixedSizeListLen {
			return fmt.Errorf("fixed_size_list size %d outside 1..%d: %w", n, MaxFixedSizeListLen, ErrBadSchema)
		}
	case *arrow.FixedSizeBinaryType:
		if n := tt.ByteWidth; n <= 0 || n > MaxFixedSizeBinaryWidth {
			return fmt.Errorf("fixed_size_binary width %d outside 1..%d: %w", n, MaxFixedSizeBinaryWidth, ErrBadSchema)
		}
	case *arrow.TimestampType:
		if err := TimeZone(tt.TimeZone); err != nil {
			return err
		}
	}
	if _, err := lancefile.LogicalType(t); err != nil {
		return fmt.Errorf("%v: %w", err, ErrBadSchema)
	}
	return nil
}

var offsetRe = regexp.MustCompile(`^[+-](\d{2})(\d{2})?$`)

// TimeZone accepts what Arrow allows in a timestamp type and Lance can
// store: empty (no zone), an IANA name ("UTC", "Europe/Paris") or a fixed
// offset "+HHMM" or "+HH" (hours up to 23, minutes up to 59). "+HH:MM" is
// refused with a hint: Lance writes the type as "timestamp:us:ZONE" and its
// official reader fails on a colon in the zone (proved in
// internal/core/lance's oracle test with "+0530"). "Local" is refused: it
// would mean a different zone on every host.
func TimeZone(tz string) error {
	if tz == "" {
		return nil
	}
	if strings.Contains(tz, ":") {
		return fmt.Errorf("time zone %q: write a UTC offset without a colon (%q): Lance cannot store a colon in a time zone: %w",
			tz, strings.ReplaceAll(tz, ":", ""), ErrBadSchema)
	}
	if m := offsetRe.FindStringSubmatch(tz); m != nil {
		h, _ := strconv.Atoi(m[1])
		mm := 0
		if m[2] != "" {
			mm, _ = strconv.Atoi(m[2])
		}
		if h > 23 || mm > 59 {
			return fmt.Errorf("time zone offset %q out of range: %w", tz, ErrBadSchema)
		}
		return nil
	}
	if tz == "Local" || strings.TrimSpace(tz) != tz {
		return fmt.Errorf("time zone %q is not an IANA name or a UTC offset like +0530: %w", tz, ErrBadSchema)
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return fmt.Errorf("time zone %q is not an IANA name or a UTC offset like +0530: %w", tz, ErrBadSchema)
	}
	return nil
}
