package lance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
)

func TestRacingWritersOneWinsNoneLost(t *testing.T) {
	o := oracletest.MustFind(t)
	d := newDataset(t, small, FileVersion2_0)
	var descs [2]Descriptor
	for i := range descs {
		r := smallBatch(i*100, 100)
		descs[i] = writeFile(t, d, r)
		r.Release()
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs2 := make([]error, 2)
	reqs := make([]CommitRequest, 2)
	for i := range 2 {
		reqs[i] = CommitRequest{ParentVersion: 1, Kind: Append, Files: descs[i : i+1], TxnID: fmt.Sprintf("txn-%d", i)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs2[i] = d.Commit(context.Background(), reqs[i])
		}()
	}
	close(start)
	wg.Wait()
	loser := -1
	for i, err := range errs2 {
		switch {
		case err == nil:
		case errors.Is(err, ErrCommitConflict) && errors.Is(err, errs.ErrConflict):
			if loser != -1 {
				t.Fatal("both writers lost")
			}
			loser = i
		default:
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if loser == -1 {
		t.Fatal("both writers won version 2")
	}
	res, err := d.CommitLatest(context.Background(), reqs[loser], 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 3 || res.FragmentIDs[0] != 1 {
		t.Fatalf("retry made version %d fragments %v", res.Version, res.FragmentIDs)
	}
	wantIDs(t, "walctl", walctlIDs(t, d), 200)
	wantIDs(t, "official", oracleIDs(t, o, d.Root()), 200)
}

func TestRetryWhoseCheckFailsOnNewParentIsRefused(t *testing.T) {
	d := newDataset(t, small, FileVersion2_0)
	ctx := context.Background()
	if _, err := d.Commit(ctx, CommitRequest{ParentVersion: 1, Kind: ConfigOnly, ConfigSet: map[string]string{"walctl.epoch": "1"}}); err != nil {
		t.Fatal(err)
	}
	errStale := fmt.Errorf("stale epoch: %w", errs.ErrFenced)
	checks := 0
	mine := CommitRequest{
		ParentVersion: 2, Kind: Append, TxnID: "plan-7",
		Check: func(parent *Manifest) error {
			checks++
			if parent.Config["walctl.epoch"] != "1" {
				return errStale
			}
			return nil
		},
	}
	r := smallBatch(0, 10)
	defer r.Release()
	mine.Files = []Descriptor{writeFile(t, d, r)}
	// A newer publisher fences first: version 3 carries epoch 2.
	if _, err := d.Commit(ctx, CommitRequest{ParentVersion: 2, Kind: ConfigOnly, ConfigSet: map[string]string{"walctl.epoch": "2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Commit(ctx, mine); !errors.Is(err, ErrCommitConflict) {
		t.Fatalf("commit on stale parent: %v", err)
	}
	_, err := d.CommitLatest(ctx, mine, 3)
	if !errors.Is(err, errStale) {
		t.Fatalf("retry on the fenced parent: %v, want the check's error", err)
	}
	if checks != 2 {
		t.Fatalf("check ran %d times, want once per attempt (2)", checks)
	}
	if v, _ := d.LatestVersion(); v != 3 {
		t.Fatalf("latest version %d after refused retry", v)
	}
}

func TestUnknownOutcomeResolvedByTransactionLookup(t *testing.T) {
	o := oracletest.MustFind(t)
	d := newDataset(t, small, FileVersion2_0)
	ctx := context.Background()
	r := smallBatch(0, 10)
	defer r.Release()
	req := CommitRequest{ParentVersion: 1, Kind: Append, Files: []Descriptor{writeFile(t, d, r)}, TxnID: "plan-42/attempt-1"}
	injected := errors.New("injected crash before directory sync")
	d.Hooks.AfterLinkBeforeDirSync = func(context.Context, uint64) error { return injected }
	_, err := d.Commit(ctx, req)
	if !errors.Is(err, ErrCommitUnknown) || !errors.Is(err, injected) {
		t.Fatalf("commit with injected fault: %v", err)
	}
	d.Hooks = Hooks{}
	v, found, err := d.FindTransaction(req.TxnID, 1)
	if err != nil || !found || v != 2 {
		t.Fatalf("FindTransaction: %d %v %v", v, found, err)
	}
	// A blind retry of the same attempt would hit EEXIST; the lookup-first
	// retry recognises its own commit instead of committing again.
	if _, err := d.Commit(ctx, req); !errors.Is(err, ErrCommitConflict) {
		t.Fatalf("blind retry: %v", err)
	}
	res, err := d.CommitLatest(ctx, req, 3)
	if err != nil || res.Version != 2 {
		t.Fatalf("resolving retry: %+v %v", res, err)
	}
	if latest, _ := d.LatestVersion(); latest != 2 {
		t.Fatalf("latest %d: the retry committed a second time", latest)
	}
	if _, found, _ := d.FindTransaction("no-such-txn", 0); found {
		t.Fatal("found a transaction that was never committed")
	}
	wantIDs(t, "official", oracleIDs(t, o, d.Root()), 10)
}

func TestBeforeLinkFaultCommitsNothing(t *testing.T) {
	d := newDataset(t, small, FileVersion2_0)
	r := smallBatch(0, 3)
	defer r.Release()
	boom := errors.New("boom")
	d.Hooks.BeforeLink = func(context.Context, uint64) error { return boom }
	_, err := d.Commit(context.Background(), CommitRequest{ParentVersion: 1, Kind: Append, Files: []Descriptor{writeFile(t, d, r)}})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if v, _ := d.LatestVersion(); v != 1 {
		t.Fatalf("latest %d after a fault before link", v)
	}
}

// A version with two manifests (one per naming) had two winners: the
// listing refuses to choose, naming both files.
func TestVersionWithTwoManifestsIsCorrupt(t *testing.T) {
	d := newDataset(t, small, FileVersion2_0)
	ctx := testCtx(t)
	raw, err := d.store.Get(ctx, versionsDir+"/"+manifestName(1, true))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.store.Put(ctx, versionsDir+"/"+manifestName(1, false), raw); err != nil {
		t.Fatal(err)
	}
	_, err = d.LatestVersion()
	if !errors.Is(err, ErrCorruptManifest) || !strings.Contains(err.Error(), "1.manifest") || !strings.Contains(err.Error(), manifestName(1, true)) {
		t.Fatalf("latest of a version with two manifests: %v; want ErrCorruptManifest naming both", err)
	}
}
