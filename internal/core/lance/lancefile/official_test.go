package lancefile

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/walctl/walctl/internal/core/lance/lancepb"
)

// encodingKinds names every encoding a file's pages use: 2.0 array
// encodings and 2.1 layouts with their compressive encodings.
func encodingKinds(t *testing.T, lf *File) map[string]bool {
	kinds := map[string]bool{}
	var walk21 func(c *lancepb.Compressive)
	walk21 = func(c *lancepb.Compressive) {
		if c == nil {
			return
		}
		kinds[fmt.Sprintf("21:%d", c.Kind)] = true
		if c.Scheme != "" {
			kinds["21:"+c.Scheme] = true
		}
		if c.HasValidity {
			kinds["21:fsl-validity"] = true
		}
		walk21(c.Inner)
		walk21(c.Values)
	}
	var walk20 func(a *lancepb.ArrayEncoding)
	walk20 = func(a *lancepb.ArrayEncoding) {
		if a == nil {
			return
		}
		kinds[fmt.Sprintf("20:%d", a.Kind)] = true
		if a.Compression != "" {
			kinds["20:"+a.Compression] = true
		}
		for _, sub := range []*lancepb.ArrayEncoding{a.Validity, a.Values, a.Items, a.Indices, a.Bytes} {
			walk20(sub)
		}
	}
	for _, c := range lf.cols {
		for _, p := range c.Pages {
			url, body, err := lancepb.DecodeAny(p.Encoding)
			if err != nil {
				t.Fatal(err)
			}
			if url == lancepb.TypeURLArrayEncoding {
				a, err := lancepb.DecodeArrayEncoding(body)
				if err != nil {
					t.Fatal(err)
				}
				walk20(a)
				continue
			}
			pl, err := lancepb.DecodePageLayout(body)
			if err != nil {
				t.Fatal(err)
			}
			kinds[fmt.Sprintf("layout:%d", pl.Kind)] = true
			for _, c := range []*lancepb.Compressive{pl.Def, pl.Value, pl.Dictionary} {
				walk21(c)
			}
		}
	}
	return kinds
}

// TestOfficialSeedsCoverEncodings checks that the official writer's files
// seeding the fuzzer and the damage test hold every encoding walctl
// decodes for it, so that neither test exercises less than it claims.
func TestOfficialSeedsCoverEncodings(t *testing.T) {
	want := map[Version][]string{
		V2_0: {"20:7", "20:zstd", "20:lz4", "20:3", "20:6"},
		V2_1: {"21:4", "21:5", "21:6", "21:8", "21:9", "21:zstd", "21:lz4", "21:fsl-validity", "layout:1"},
	}
	seen := map[Version]bool{}
	for _, seed := range officialSeeds(t) {
		lf, err := openReaderAt(bytes.NewReader(seed), int64(len(seed)), "official.lance")
		if err != nil {
			t.Fatal(err)
		}
		seen[lf.Version] = true
		kinds := encodingKinds(t, lf)
		if len(want[lf.Version]) == 0 {
			t.Fatalf("official seed of version %v", lf.Version)
		}
		for _, k := range want[lf.Version] {
			if !kinds[k] {
				t.Errorf("official %v seed lacks encoding %s (has %v)", lf.Version, k, kinds)
			}
		}
	}
	if !seen[V2_0] || !seen[V2_1] {
		t.Fatalf("official seeds of versions %v, want 2.0 and 2.1", seen)
	}
}
