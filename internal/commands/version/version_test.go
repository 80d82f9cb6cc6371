package version

import (
	"context"
	"testing"

	"github.com/walctl/walctl/internal/buildinfo"
	"github.com/walctl/walctl/internal/commands/render"
)

func TestVersionRun(t *testing.T) {
	var printed any
	var rows *render.Table
	opts := &Options{Print: func(v any, r func() *render.Table) error { printed, rows = v, r(); return nil }}
	if err := versionRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if info := printed.(buildinfo.Info); info.GoVersion == "" || rows == nil {
		t.Fatalf("%+v", info)
	}
}
