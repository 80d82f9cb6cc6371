package lancefile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// decodePage21 would decode a file-format-2.1 page. walctl does not read 2.1
// pages yet (the official writer compresses them: bit-packing, FSST), so it
// refuses them with an error the caller completes with file and column.
func decodePage21(_ []byte, _ [][]byte, _ int, dt arrow.DataType, _ memory.Allocator) (arrow.Array, error) {
	return nil, fmt.Errorf("file format 2.1 page of %s: %w", dt, ErrUnsupported)
}
