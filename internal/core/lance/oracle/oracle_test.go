package oracle

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/errs"
)

func TestSplitPathsAndURIs(t *testing.T) {
	for _, c := range []struct{ root, dir, name string }{
		{"/data/lake/orders.lance", "/data/lake", "orders"},
		{"s3://bucket-one/lake/orders.lance", "s3://bucket-one/lake", "orders"},
		{"s3://bucket-one/orders.lance", "s3://bucket-one", "orders"},
	} {
		dir, name, err := split(c.root)
		if err != nil || dir != c.dir || name != c.name {
			t.Errorf("split(%q) = %q, %q, %v; want %q, %q", c.root, dir, name, err, c.dir, c.name)
		}
	}
	for _, bad := range []string{"s3://orders.lance", "s3://bucket-one/lake/orders", "/data/orders", "s3://bucket-one/.lance"} {
		if _, _, err := split(bad); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("split(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestS3OptionsAllowHTTPOnlyForHTTP(t *testing.T) {
	if o := S3Options("http://127.0.0.1:9000", "us-east-1", "AK", "SK"); o["allow_http"] != "true" || o["aws_endpoint"] != "http://127.0.0.1:9000" || o["aws_secret_access_key"] != "SK" {
		t.Fatalf("http endpoint: %v", o)
	}
	if o := S3Options("https://s3.example", "eu-west-1", "AK", "SK"); o["allow_http"] != "" || o["aws_region"] != "eu-west-1" {
		t.Fatalf("https endpoint: %v", o)
	}
}

func TestParseInt64(t *testing.T) {
	if v, err := ParseInt64([]byte(`"9007199254740993"`)); err != nil || v != 9007199254740993 {
		t.Fatalf("ParseInt64: %d, %v", v, err)
	}
	if _, err := ParseInt64([]byte(`12`)); err == nil {
		t.Fatal("a bare number is not how the reader prints an int64: want an error")
	}
	d := &Dump{Columns: map[string][]json.RawMessage{"id": {[]byte(`"1"`), []byte(`"x"`)}}}
	if _, err := d.Int64s("id"); err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("Int64s of a bad row: %v, want an error naming row 1", err)
	}
}
