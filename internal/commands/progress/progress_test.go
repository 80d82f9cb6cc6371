package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	got := Format(Status{Label: "publishing", Done: 50 << 20, Total: 100 << 20, Bytes: true, Extra: "3 generations"}, 10*time.Second)
	want := "publishing: 50 MiB / 100 MiB (50%), 5.0 MiB/s, ETA 10s, 3 generations"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestQuietAndPiped(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(0, 0)
	clock := func() time.Time { now = now.Add(time.Second); return now }

	r := New(&b, false, false, clock) // piped: no live line, summary only
	r.Update(Status{Done: 1, Total: 2})
	r.Done("done: 2 records")
	if b.String() != "done: 2 records\n" {
		t.Fatalf("piped: %q", b.String())
	}

	b.Reset()
	r = New(&b, true, true, clock) // json: nothing at all
	r.Update(Status{Done: 1, Total: 2})
	r.Done("done")
	if b.Len() != 0 {
		t.Fatalf("quiet wrote %q", b.String())
	}

	b.Reset()
	r = New(&b, true, false, clock) // terminal: live line then cleared
	r.Update(Status{Label: "x", Done: 1, Total: 2})
	if !strings.HasPrefix(b.String(), "\rx: 1 / 2 (50%)") {
		t.Fatalf("live: %q", b.String())
	}
	r.Done("ok")
	if !strings.HasSuffix(b.String(), "\rok\n") {
		t.Fatalf("summary after clear: %q", b.String())
	}
}
