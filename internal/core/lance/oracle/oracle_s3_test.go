package oracle_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// The official reader works on a table in a real S3 bucket through storage
// options alone: it creates one, appends to it, reads it at the latest and
// at the earlier version, and what it wrote is in the bucket under the
// prefix (no local copy).
func TestOracleOnS3Bucket(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{Bucket: "oracle-bucket"})
	o := oracletest.MustFind(t).WithStorage(oracle.S3Options(srv.Endpoint, s3server.Region, srv.AccessKey, srv.SecretKey))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table := srv.URL("lake/orders.lance")

	spec := map[string]any{
		"schema": []map[string]any{{"name": "id", "type": "int64", "nullable": false}, {"name": "note", "type": "utf8", "nullable": true}},
		"rows":   []map[string]any{{"id": 1, "note": "a"}, {"id": 2, "note": nil}},
	}
	if r, err := o.Create(ctx, table, spec, ""); err != nil || r.Version != 1 || r.CountRows != 2 {
		t.Fatalf("create on S3: %+v, %v", r, err)
	}
	if r, err := o.Append(ctx, table, []map[string]any{{"id": 3, "note": "c"}}); err != nil || r.Version != 2 || r.CountRows != 3 {
		t.Fatalf("append on S3: %+v, %v", r, err)
	}
	latest, err := o.Dump(ctx, table, oracle.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, latest); latest.Version != 2 || got != "1,2,3" {
		t.Fatalf("latest: version %d ids %s, want 2 and 1,2,3", latest.Version, got)
	}
	if notes := string(mustJSON(t, latest.Columns["note"])); notes != `["a",null,"c"]` {
		t.Fatalf("notes %s", notes)
	}
	v1, err := o.Dump(ctx, table, oracle.DumpOptions{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, v1); v1.Version != 1 || got != "1,2" {
		t.Fatalf("version 1: version %d ids %s", v1.Version, got)
	}

	list, err := srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(srv.Bucket), Prefix: aws.String("lake/orders.lance/_versions/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) != 2 {
		t.Fatalf("%d manifests in the bucket, want 2", len(list.Contents))
	}

	// The keys in the options are what opened it: another secret is refused.
	wrong := oracle.S3Options(srv.Endpoint, s3server.Region, srv.AccessKey, "not-"+srv.SecretKey)
	if _, err := o.WithStorage(wrong).Dump(ctx, table, oracle.DumpOptions{}); err == nil {
		t.Fatal("the reader opened the bucket with a wrong secret")
	}
}

func ids(t *testing.T, d *oracle.Dump) string {
	t.Helper()
	var out []string
	for _, raw := range d.Columns["id"] {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
