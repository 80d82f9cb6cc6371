package lance

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/walctl/walctl/internal/core/errs"
)

// manifestSeeds are manifest files the writer produced: a new table, a
// config-only commit (a fence) and an append with two fragments.
func manifestSeeds(t testing.TB) [][]byte {
	d := newDataset(t, small, FileVersion2_0)
	ctx := context.Background()
	if _, err := d.Commit(ctx, CommitRequest{ParentVersion: 1, Kind: ConfigOnly, ConfigSet: map[string]string{"walctl.epoch": "1"}}); err != nil {
		t.Fatal(err)
	}
	var files []Descriptor
	for i := range 2 {
		r := smallBatch(i*10, 10)
		files = append(files, writeFile(t, d, r))
		r.Release()
	}
	if _, err := d.Commit(ctx, CommitRequest{ParentVersion: 2, Kind: Append, Files: files, ConfigSet: map[string]string{"walctl.plan": "p"}}); err != nil {
		t.Fatal(err)
	}
	vs, err := d.Versions()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, v := range vs {
		raw, err := os.ReadFile(v.Path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

// FuzzManifestFile reads garbage as a manifest file, as Open, Scan and a
// commit on top of it would (DESIGN.md §3 rule 18): no panic, every
// refusal classified, and a manifest that parses can be committed on.
func FuzzManifestFile(f *testing.F) {
	for _, seed := range manifestSeeds(f) {
		f.Add(seed)
	}
	d := &Dataset{root: f.TempDir()}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := parseManifest("fuzz.manifest", raw)
		if err != nil {
			manifestClassified(t, err)
			return
		}
		if _, err := m.Schema(); err != nil {
			manifestClassified(t, err)
		}
		if _, err := m.FileVersion(); err != nil {
			manifestClassified(t, err)
		}
		if _, _, err := m.Transaction(d.store); err != nil && !errors.Is(err, os.ErrNotExist) {
			manifestClassified(t, err)
		}
		m.Rows()
		m.MaxFragmentID()
		req := CommitRequest{Kind: ConfigOnly, ConfigSet: map[string]string{"walctl.epoch": "2"}, TxnID: "t", Now: func() time.Time { return time.Unix(1, 0) }}
		next, txn, _, err := d.buildNext(m, &req)
		if err != nil {
			manifestClassified(t, err)
			return
		}
		file := encodeManifestFile(next, txn.Encode(), nil)
		again, err := parseManifest("next.manifest", file)
		if err != nil || again.Version != m.Version+1 || again.Config["walctl.epoch"] != "2" {
			t.Fatalf("a commit on a parsed manifest does not parse back: %v", err)
		}
	})
}

func manifestClassified(t *testing.T, err error) {
	t.Helper()
	for _, want := range []error{errs.ErrCorrupt, ErrUnsupported, ErrUnsupportedType, errs.ErrInvalid} {
		if errors.Is(err, want) {
			return
		}
	}
	t.Fatalf("unclassified error on a bad manifest: %v", err)
}
