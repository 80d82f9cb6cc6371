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
