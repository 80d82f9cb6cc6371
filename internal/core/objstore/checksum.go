package objstore

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// castagnoli is the CRC-32C table: the checksum walctl's data files carry
// and the one every S3 write sends (x-amz-checksum-crc32c).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32cHeader is sum as S3 spells a CRC-32C: base64 of its big-endian
// bytes.
func crc32cHeader(sum uint32) *string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum)
	return aws.String(base64.StdEncoding.EncodeToString(b[:]))
}

// fullCRC32C reads the whole-object CRC-32C of a store's answer. A missing
// value, a composite one ("…-N": a checksum of part checksums) or anything
// that is not four bytes is no checksum at all.
func fullCRC32C(v *string, typ types.ChecksumType) (uint32, bool) {
	if v == nil || typ == types.ChecksumTypeComposite {
		return 0, false
	}
	b, err := base64.StdEncoding.DecodeString(*v)
	if err != nil || len(b) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

// crc32Combine returns the CRC-32C of A followed by B from crcA, crcB and
// B's length (zlib's crc32_combine, over GF(2)): the writer checksums each
// part once and still knows the whole object's checksum.
func crc32Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	var even, odd [32]uint32
	odd[0] = crc32.Castagnoli // the operator for one zero bit
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four
	// Apply lenB zero bytes to crcA, squaring the operator per bit of lenB.
	for {
		gf2Square(&even, &odd)
		if lenB&1 != 0 {
			crcA = gf2Times(&even, crcA)
		}
		if lenB >>= 1; lenB == 0 {
			break
		}
		gf2Square(&odd, &even)
		if lenB&1 != 0 {
			crcA = gf2Times(&odd, crcA)
		}
		if lenB >>= 1; lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := range mat {
		square[n] = gf2Times(mat, mat[n])
	}
}
