package failpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestErrorWithArgAndCount(t *testing.T) {
	defer Reset()
	if err := Enable("after-files-prepared=error@2*1", ""); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := Inject(ctx, AfterFilesPrepared, 1); err != nil {
		t.Fatalf("arg 1 fired: %v", err)
	}
	if err := Inject(ctx, AfterFilesPrepared, 2); !errors.Is(err, ErrInjected) {
		t.Fatalf("arg 2: %v", err)
	}
	if err := Inject(ctx, AfterFilesPrepared, 2); err != nil {
		t.Fatalf("fired twice: %v", err)
	}
	if err := Inject(ctx, BeforeManifestLink, 0); err != nil {
		t.Fatalf("other point fired: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	defer Reset()
	dir := t.TempDir()
	if err := Enable(BeforeManifestLink+"=pause", dir); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Inject(context.Background(), BeforeManifestLink, 0) }()
	paused := filepath.Join(dir, BeforeManifestLink+".paused")
	for i := 0; ; i++ {
		if _, err := os.Stat(paused); err == nil {
			break
		}
		if i > 500 {
			t.Fatal("never paused")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("returned before resume")
	default:
	}
	if err := os.WriteFile(filepath.Join(dir, BeforeManifestLink+".resume"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBadSpec(t *testing.T) {
	defer Reset()
	for _, s := range []string{"x", "x=explode", "x=error@a", "x=error*b"} {
		if err := Enable(s, ""); err == nil {
			t.Errorf("Enable(%q) accepted", s)
		}
	}
}
