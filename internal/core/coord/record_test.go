package coord

import (
	"errors"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
)

// Rule 16's last sentence: a record of an unknown kind or a newer schema
// version fails closed, naming the key and the version, on every path that
// reads it.
func TestUnknownRecordsFailClosed(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, testPrefix(t), Config{})
	for _, tc := range []struct {
		name, value string
		want        error
		mention     string
	}{
		{"newer schema", `{"kind":"claim","schema_version":2,"table":"t"}`, ErrUnknownRecord, "schema version 2"},
		{"unknown kind", `{"kind":"lock","schema_version":1}`, ErrUnknownRecord, `"lock"`},
		{"no kind", `{"schema_version":1}`, ErrUnknownRecord, `kind ""`},
		{"no version", `{"kind":"claim"}`, ErrUnknownRecord, "schema version 0"},
		{"not JSON", `owner=me`, errs.ErrCorrupt, "unparsable"},
		{"wrong field type", `{"kind":"claim","schema_version":1,"epoch":"seven"}`, errs.ErrCorrupt, "unparsable claim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := c.ClaimKey("t")
			if _, err := c.Etcd().Put(ctx, key, tc.value); err != nil {
				t.Fatal(err)
			}
			defer c.Etcd().Delete(ctx, key)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, tc.want) || !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), tc.mention) {
					t.Errorf("%s: %v; want %v naming %s and %s", what, err, tc.want, key, tc.mention)
				}
			}
			_, err := c.Get(ctx, "t")
			check("Get", err)
			_, err = c.List(ctx)
			check("List", err)
			_, err = c.Revoke(ctx, RevokeRequest{Table: "t", Actor: "op"})
			check("Revoke", err)
			_, err = c.Acquire(ctx, "t", worker("w"), func(o *acquireOptions) { o.skipHint = true })
			check("Acquire", err)
			if r, err := c.Etcd().Get(ctx, key); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != tc.value {
				t.Errorf("the unknown record was changed: %v %v", r, err)
			}
		})
	}

	// A reservation from a newer master stops the catch-up executor too.
	rk := c.ReservationKey("r")
	if _, err := c.Etcd().Put(ctx, rk, `{"kind":"reservation","schema_version":3,"job_id":"j"}`); err != nil {
		t.Fatal(err)
	}
	_, err := c.Acquire(ctx, "r", Owner{ID: "x", Kind: OwnerCatchup, JobID: "j"})
	if !errors.Is(err, ErrUnknownRecord) || !strings.Contains(err.Error(), rk) {
		t.Fatalf("catch-up on a newer reservation: %v", err)
	}
}
