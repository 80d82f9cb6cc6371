package schemaspec

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walctl/walctl/internal/core/errs"
)

func TestRoundTripEveryType(t *testing.T) {
	names := []string{"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
		"float16", "float32", "float64", "utf8", "large_utf8", "binary", "large_binary", "date32",
		"timestamp[s]", "timestamp[ms]", "timestamp[us, UTC]", "timestamp[ns, Europe/Paris]",
		"fixed_size_binary[16]", "fixed_size_list<float32>[768]", "fixed_size_list<float16>[8]",
		"fixed_size_list<int8>[4]", "fixed_size_list<uint8>[32]"}
	for _, n := range names {
		ty, err := ParseType(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if got := FormatType(ty); got != n {
			t.Errorf("FormatType(ParseType(%q)) = %q", n, got)
		}
	}
}

func TestParseJSON(t *testing.T) {
	s, err := Parse([]byte(`[{"name":"id","type":"int64"},{"name":"body","type":"utf8","nullable":true}]`))
	if err != nil {
		t.Fatal(err)
	}
	if s.NumFields() != 2 || s.Field(1).Type.ID() != arrow.STRING || !s.Field(1).Nullable || s.Field(0).Nullable {
		t.Fatalf("got %v", s)
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		`[{"name":"id","type":"int64","nullabel":true}]`:          `unknown field "nullabel"`,
		`[{"name":"id","type":"int128"}]`:                         `field "id": unknown type "int128"`,
		`[{"name":"a","type":"int8"},{"name":"a","type":"int8"}]`: `"a" appears twice`,
		`[]`:   "no fields",
		`junk`: "neither a JSON field list nor an Arrow IPC stream",
		`[{"name":"v","type":"fixed_size_list<float32>[0]"}]`: "N in 1..65536",
		// issue 13 item 10: no int32 wrap-around, a documented limit
		`[{"name":"v","type":"fixed_size_list<float32>[99999999999]"}]`: "N in 1..65536",
		`[{"name":"v","type":"fixed_size_list<float32>[65537]"}]`:       "N in 1..65536",
		`[{"name":"v","type":"fixed_size_binary[99999999999]"}]`:        "width must be 1..65536",
		`[{"name":"t","type":"timestamp[us, Mars/Olympus_Mons]"}]`:      `time zone "Mars/Olympus_Mons" is not an IANA name`,
		`[{"name":"t","type":"timestamp[us, +2500]"}]`:                  `offset "+2500" out of range`,
		`[{"name":"t","type":"timestamp[us, +05:30]"}]`:                 `without a colon ("+0530")`,
		`[{"name":"t","type":"timestamp[us, Local]"}]`:                  `time zone "Local"`,
		`[{"name":"a\u0000b","type":"int8"}]`:                           `control character U+0000`,
		`[{"name":"a\u001b[31m","type":"int8"}]`:                        `"a\x1b[31m" has control character U+001B`,
		`[{"name":"a\u202eb","type":"int8"}]`:                           `control character U+202E`,
		`[{"name":"x","type":"int8"},{"name":"X","type":"int8"}]`:       `"x" and "X" differ only in case`,
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v; want ErrInvalid containing %q", in, err, want)
		}
	}
}

func TestParseIPCStream(t *testing.T) {
	want := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
	var b bytes.Buffer
	w := ipc.NewWriter(&b, ipc.WithSchema(want), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b.Bytes())
	if err != nil || !got.Equal(want) {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestParseAcceptsLimitsAndZones(t *testing.T) {
	for _, typ := range []string{"fixed_size_list<float32>[65536]", "fixed_size_binary[65536]",
		"timestamp[us, +0530]", "timestamp[us, -0800]", "timestamp[ms, +01]", "timestamp[ns, America/New_York]",
		"timestamp[s, Etc/GMT+3]"} {
		if _, err := Parse([]byte(`[{"name":"f","type":"` + typ + `"}]`)); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// TestParseIPCSchemaChecked: a schema taken from an Arrow IPC stream passes
// the same checks as a JSON one (the Arrow form can say what JSON cannot).
func TestParseIPCSchemaChecked(t *testing.T) {
	for want, fields := range map[string][]arrow.Field{
		"differ only in case":   {{Name: "x", Type: arrow.PrimitiveTypes.Int8}, {Name: "X", Type: arrow.PrimitiveTypes.Int8}},
		"size 2147483647":       {{Name: "v", Type: arrow.FixedSizeListOf(1<<31-1, arrow.PrimitiveTypes.Float32)}},
		"unsupported type":      {{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}},
		`time zone "Nowhere/X"`: {{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Nowhere/X"}}},
		"control character":     {{Name: "a\x00", Type: arrow.PrimitiveTypes.Int8}, {Name: "b\x1b", Type: arrow.PrimitiveTypes.Int8}},
	} {
		var b bytes.Buffer
		w := ipc.NewWriter(&b, ipc.WithSchema(arrow.NewSchema(fields, nil)))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := Parse(b.Bytes())
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want ErrInvalid containing %q", fields, err, want)
		}
	}
}
