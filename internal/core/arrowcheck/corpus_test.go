package arrowcheck_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/arrowcheck/arrowchecktest"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz seeds from arrowchecktest")

// schemaSeeds are JSON schemas for FuzzSchema, accepted and refused.
var schemaSeeds = map[string]string{
	"json-timestamp":  `[{"name":"id","type":"int64"},{"name":"ts","type":"timestamp[us, UTC]","nullable":true}]`,
	"json-wrapped":    `{"fields":[{"name":"v","type":"fixed_size_list<float32>[768]"}]}`,
	"json-huge-width": `[{"name":"v","type":"fixed_size_list<float32>[99999999999]"}]`,
	"json-offset-tz":  `[{"name":"t","type":"timestamp[ns, +0530]"},{"name":"d","type":"date32"}]`,
	"json-case-twins": `[{"name":"x","type":"int8"},{"name":"X","type":"int8"}]`,
	"json-escape":     `[{"name":"a\u001b","type":"utf8"}]`,
}

// seeds returns the checked-in corpus: fuzz target → file name → arguments.
func seeds() map[string]map[string][][]byte {
	_, all := arrowchecktest.AllTypes()
	schemaJSON := []byte(arrowchecktest.SchemaJSON)
	batch := map[string][][]byte{
		"valid-fixture":  {arrowchecktest.Valid(), schemaJSON},
		"valid-alltypes": {all, nil}, // the stream's own schema
	}
	for _, c := range arrowchecktest.Cases() {
		batch["bad-"+strings.ReplaceAll(c.Rule, " ", "-")] = [][]byte{c.Stream, schemaJSON}
	}
	schema := map[string][][]byte{
		"fixture-json": {schemaJSON},
		"alltypes-ipc": {all},
		"fixture-ipc":  {arrowchecktest.Valid()},
	}
	for name, s := range schemaSeeds {
		schema[name] = [][]byte{[]byte(s)}
	}
	return map[string]map[string][][]byte{"FuzzBatch": batch, "FuzzSchema": schema}
}

func corpusFile(args [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		fmt.Fprintf(&b, "[]byte(%q)\n", a)
	}
	return b.Bytes()
}

// TestFuzzCorpusUpToDate keeps testdata/fuzz in step with the fixtures
// (`go test -run TestFuzzCorpusUpToDate -update-corpus` rewrites it); the
// files are what `go test` runs FuzzBatch and FuzzSchema on.
func TestFuzzCorpusUpToDate(t *testing.T) {
	for target, files := range seeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, args := range files {
			path := filepath.Join(dir, name)
			want := corpusFile(args)
			if *updateCorpus {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s is missing or stale (%v): run go test -run TestFuzzCorpusUpToDate -update-corpus", path, err)
			}
		}
	}
}
