package render

import (
	"bytes"
	"strings"
	"testing"
)

func TestPlainAligns(t *testing.T) {
	tb := NewTable("key", "value")
	tb.Add("a", "1")
	tb.Add("longer-key", "2")
	var b bytes.Buffer
	if err := Plain(&b, tb); err != nil {
		t.Fatal(err)
	}
	want := "KEY         VALUE\na           1\nlonger-key  2\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
}

func TestPrettyHasAllCells(t *testing.T) {
	tb := NewTable("check", "status")
	tb.Status = 1
	tb.Add("etcd", "ok")
	tb.Add("wal", "fail")
	var b bytes.Buffer
	if err := Pretty(&b, tb); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"check", "status", "etcd", "ok", "wal", "fail", "╭"} {
		if !strings.Contains(b.String(), s) {
			t.Fatalf("pretty output lacks %q:\n%s", s, b.String())
		}
	}
}

// TestControlCharactersEscaped: a name or value with ESC, NUL, a newline or
// a bidi override cannot drive the terminal or break a row (issue 13 item 10).
func TestControlCharactersEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"plain é 列":       "plain é 列",
		"red\x1b[31m":     `red\x1b[31m`,
		"nul\x00":         `nul\x00`,
		"two\nlines\ttab": `two\nlines\ttab`,
		"rtl\u202eevil":   `rtl\u202eevil`,
		"bad\xffutf8":     `bad\xffutf8`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	tb := NewTable("field", "type")
	tb.Add("a\x1b[2Jb", "int8")
	for _, r := range []func(*bytes.Buffer, *Table) error{
		func(b *bytes.Buffer, t *Table) error { return Plain(b, t) },
		func(b *bytes.Buffer, t *Table) error { return Pretty(b, t) },
	} {
		var b bytes.Buffer
		if err := r(&b, tb); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "\x1b[2J") || !strings.Contains(b.String(), `a\x1b[2Jb`) {
			t.Fatalf("output not escaped: %q", b.String())
		}
	}
}
