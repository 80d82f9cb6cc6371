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
		`[{"name":"v","type":"fixed_size_list<float32>[0]"}]`: "N > 0",
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
