package lance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/walctl/walctl/internal/core/durable"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// Every directory Create makes, every manifest link and every data file
// goes through durable: with fsyncs failing, none of them is reported
// done, and the error names the directory or file and the errno. (Before,
// Create synced nothing above _versions and passed with the same disk.)
func TestFailedSyncsAreReportedNotIgnored(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	fail := func() {
		if err := failpoint.Enable(durable.FailSync+"=error", ""); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, err error, names string) {
		t.Helper()
		if !errors.Is(err, durable.ErrSyncFailed) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), names) {
			t.Fatalf("%s: %v, want ErrSyncFailed naming %s", what, err, names)
		}
	}

	// A new Lance root: its own directory is the first synced.
	root := filepath.Join(t.TempDir(), "tables")
	fail()
	_, err := Create(filepath.Join(root, "t.lance"), small, CreateOptions{})
	check("create", err, "fsync directory "+root)
	failpoint.Reset()

	d := newDataset(t, small, FileVersion2_0)
	fail()
	check("sync layout", d.SyncLayout(), "fsync directory "+filepath.Join(d.Root(), versionsDir))
	_, err = d.Commit(context.Background(), CommitRequest{ParentVersion: 1, Kind: ConfigOnly, ConfigSet: map[string]string{"k": "v"}})
	check("commit", err, filepath.Join(d.Root(), tmpDir))
	failpoint.Reset()
	if v, _ := d.LatestVersion(); v != 1 {
		t.Fatalf("a manifest whose fsync failed was linked: latest %d", v)
	}

	// The directory sync after the link: linked, outcome unknown, and the
	// cause is a failed fsync (a caller must not sync again and trust it).
	d.Hooks.AfterLinkBeforeDirSync = func(context.Context, uint64) error { fail(); return nil }
	_, err = d.Commit(context.Background(), CommitRequest{ParentVersion: 1, Kind: ConfigOnly, ConfigSet: map[string]string{"k": "v"}})
	check("commit after link", err, "fsync directory "+filepath.Join(d.Root(), versionsDir))
	if !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("commit after link: %v, want ErrCommitUnknown", err)
	}
	failpoint.Reset()
	d.Hooks = Hooks{}

	m, err := d.Latest()
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Schema()
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.CreateFile(s, FileOptions{Name: "f", Version: FileVersion2_0})
	if err != nil {
		t.Fatal(err)
	}
	rec := smallBatch(0, 10)
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	fail()
	_, err = w.Close()
	check("data file", err, filepath.Join(d.Root(), dataDir, "f.lance"))
	if _, serr := os.Stat(filepath.Join(d.Root(), dataDir, "f.lance")); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("a data file whose fsync failed was left: %v", serr)
	}
}
