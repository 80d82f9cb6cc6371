// Package watermarks reads published watermarks from Lance tables for the
// catch-up backlog scan (catchup.Scanner), keeping package catchup free of
// any dependency on the Lance and publish code.
package watermarks

import (
	"context"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/core/publish"
)

// FromLance returns a catchup.WatermarkFunc that reads the watermarks of the
// latest version of <lanceRoot>/<table>.lance (a managed read, DESIGN.md
// §3 rule 13: no claim, no epoch). A table with no dataset yet has
// published nothing (empty watermarks); any other error (a corrupt
// manifest, a bad name) is returned. It does not block on ctx: a manifest
// read is one small file.
func FromLance(lanceRoot string) catchup.WatermarkFunc {
	return func(_ context.Context, table string) (map[int]uint64, error) {
		return publish.LatestWatermarks(lanceRoot, table)
	}
}

// FromStore is FromLance for a lance root on any store (a directory or an
// S3 prefix).
func FromStore(root objstore.Store) catchup.WatermarkFunc {
	return func(_ context.Context, table string) (map[int]uint64, error) {
		return publish.LatestWatermarksOn(root, table)
	}
}
