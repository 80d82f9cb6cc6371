package lancefile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Lance's general compression of a buffer (lance-encoding's block.rs):
// zstd is a u64 uncompressed length and a zstd frame (older writers wrote
// the bare frame), lz4 a u32 uncompressed length and an lz4 block.

// maxGeneralRatio bounds the uncompressed size a buffer may announce, so
// that a damaged length cannot make the reader allocate without limit
// (lz4 expands at most 255 times; zstd frames of Lance pages far less).
const maxGeneralRatio = 1 << 10

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
})

// generalDecompress returns the uncompressed bytes of buf.
func generalDecompress(scheme string, buf []byte) ([]byte, error) {
	switch scheme {
	case "zstd":
		return zstdDecompress(buf)
	case "lz4":
		if len(buf) < 4 {
			return nil, fmt.Errorf("lz4 buffer of %d bytes: %w", len(buf), ErrCorrupt)
		}
		size := uint64(binary.LittleEndian.Uint32(buf))
		if size > maxGeneralRatio*uint64(len(buf)) {
			return nil, fmt.Errorf("lz4 buffer of %d bytes announces %d: %w", len(buf), size, ErrCorrupt)
		}
		out := make([]byte, size)
		n, err := lz4.UncompressBlock(buf[4:], out)
		if err != nil || uint64(n) != size {
			return nil, fmt.Errorf("lz4 buffer of %d bytes gave %d of %d (%v): %w", len(buf), n, size, err, ErrCorrupt)
		}
		return out, nil
	}
	return nil, fmt.Errorf("general compression %q: %w", scheme, ErrUnsupported)
}

func zstdDecompress(buf []byte) ([]byte, error) {
	if len(buf) == 0 {
		return nil, nil
	}
	d, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	size := uint64(0)
	frame := buf
	// A bare frame starts with the magic and a header whose reserved bit
	// is clear; anything else is length-prefixed.
	if len(buf) >= 8 && !(bytes.HasPrefix(buf, zstdMagic) && buf[4]&0x10 == 0) {
		size, frame = binary.LittleEndian.Uint64(buf), buf[8:]
		if size > maxGeneralRatio*uint64(len(buf)) {
			return nil, fmt.Errorf("zstd buffer of %d bytes announces %d: %w", len(buf), size, ErrCorrupt)
		}
	}
	out, err := d.DecodeAll(frame, make([]byte, 0, size))
	if err != nil || (size > 0 && uint64(len(out)) != size) {
		return nil, fmt.Errorf("zstd buffer of %d bytes gave %d of %d (%v): %w", len(buf), len(out), size, err, ErrCorrupt)
	}
	return out, nil
}
