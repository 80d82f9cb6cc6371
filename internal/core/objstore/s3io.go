package objstore

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// s3Reader reads ranges of one object. It pins the object's ETag so a
// replaced object fails the read instead of mixing two versions.
type s3Reader struct {
	ctx  context.Context
	s    *S3
	key  string
	etag *string
	size int64
}

// Open HEADs the object and returns a reader of byte ranges.
func (s *S3) Open(ctx context.Context, key string) (Reader, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key))})
	if err != nil {
		return nil, s.wrap("open", key, err)
	}
	return &s3Reader{ctx: ctx, s: s, key: key, etag: out.ETag, size: aws.ToInt64(out.ContentLength)}, nil
}

func (r *s3Reader) Size() int64  { return r.size }
func (r *s3Reader) Close() error { return nil }

// ReadAt is one ranged GET.
func (r *s3Reader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off >= r.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), r.size) - 1
	out, err := r.s.client.GetObject(r.ctx, &s3.GetObjectInput{
		Bucket: &r.s.bucket, Key: aws.String(r.s.full(r.key)), IfMatch: r.etag,
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, end)),
	})
	if err != nil {
		return 0, r.s.wrap("read", r.key, err)
	}
	defer out.Body.Close()
	n, err := io.ReadFull(out.Body, p[:end-off+1])
	if err != nil {
		return n, r.s.wrap("read", r.key, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// s3Writer streams an object with two part buffers: bytes under one part
// are sent by a single PutObject at Commit; a larger object becomes a
// multipart upload in which one full part is uploading while the next one
// fills, so memory stays at two parts and encoding overlaps the network.
// Every request carries the CRC-32C of its bytes, and a multipart upload
// asks for a FULL_OBJECT CRC-32C, so the store checks each part and keeps
// the checksum of the whole object, which a verifier then reads with one
// HEAD instead of downloading the object.
type s3Writer struct {
	ctx      context.Context
	s        *S3
	key      string
	buf      []byte // filling
	spare    []byte // the buffer of the part in flight, reused when it is sent
	crc      uint32 // of every byte written so far
	size     int64
	upload   *string
	parts    []types.CompletedPart
	inflight chan partResult // the part being uploaded, or nil
	done     bool
	err      error
	info     Info // once committed
}

type partResult struct {
	part types.CompletedPart
	err  error
}

// Create returns a streaming writer of key.
func (s *S3) Create(ctx context.Context, key string) (Writer, error) {
	return &s3Writer{ctx: ctx, s: s, key: key, buf: make([]byte, 0, s.partSize)}, nil
}

// BufferBytes is two parts: the one filling and the one uploading.
func (w *s3Writer) BufferBytes() int { return 2 * w.s.partSize }

// CRC32C is the checksum of the parts sent so far and the bytes in the
// filling buffer.
func (w *s3Writer) CRC32C() uint32 {
	return crc32Combine(w.crc, crc32.Checksum(w.buf, castagnoli), int64(len(w.buf)))
}

// Committed is the object as the store answered its last request.
func (w *s3Writer) Committed() Info { return w.info }

func (w *s3Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), w.s.partSize-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(w.buf) == w.s.partSize {
			if w.err = w.sendPart(); w.err != nil {
				return n, w.err
			}
		}
	}
	return n, nil
}

// wait collects the part in flight, if any.
func (w *s3Writer) wait() error {
	if w.inflight == nil {
		return nil
	}
	r := <-w.inflight
	w.inflight = nil
	if r.err != nil {
		return r.err
	}
	w.parts = append(w.parts, r.part)
	return nil
}

// sendPart starts uploading the filled buffer once the part before it is
// sent, and gives the writer the other buffer to fill. The part's CRC-32C
// is computed here, while the previous part may still be on the wire: the
// request carries it and the completion needs it.
func (w *s3Writer) sendPart() error {
	if err := w.wait(); err != nil {
		return err
	}
	if w.upload == nil {
		out, err := w.s.client.CreateMultipartUpload(w.ctx, &s3.CreateMultipartUploadInput{
			Bucket: &w.s.bucket, Key: aws.String(w.s.full(w.key)),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, ChecksumType: types.ChecksumTypeFullObject,
		})
		if err != nil {
			return w.s.wrap("start upload of", w.key, err)
		}
		w.upload = out.UploadId
	}
	num, body := int32(len(w.parts)+1), w.buf
	sum := crc32cHeader(w.note(body))
	w.inflight = make(chan partResult, 1)
	go func(ch chan<- partResult) {
		out, err := w.s.client.UploadPart(w.ctx, &s3.UploadPartInput{
			Bucket: &w.s.bucket, Key: aws.String(w.s.full(w.key)), UploadId: w.upload,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			ChecksumCRC32C: sum,
		})
		if err != nil {
			ch <- partResult{err: w.s.wrap(fmt.Sprintf("upload part %d of", num), w.key, err)}
			return
		}
		ch <- partResult{part: types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num), ChecksumCRC32C: sum}}
	}(w.inflight)
	if w.spare == nil {
		w.spare = make([]byte, 0, w.s.partSize)
	}
	w.buf, w.spare = w.spare[:0], body
	return nil
}

// note adds b, the next bytes of the object, to its size and CRC-32C and
// returns b's own CRC-32C.
func (w *s3Writer) note(b []byte) uint32 {
	sum := crc32.Checksum(b, castagnoli)
	w.crc = crc32Combine(w.crc, sum, int64(len(b)))
	w.size += int64(len(b))
	return sum
}

// Commit sends the rest: one PutObject for a small object, or the last part
// and CompleteMultipartUpload with the whole object's CRC-32C (the store
// refuses it if the parts it holds do not add up to it). On error the
// upload is aborted.
func (w *s3Writer) Commit() error {
	if w.done {
		return fmt.Errorf("%s: already closed", w.s.Join(w.key))
	}
	err := w.err
	if err == nil && w.upload == nil {
		w.info, err = w.s.put(w.ctx, w.key, w.buf, w.note(w.buf))
	} else if err == nil {
		err = w.complete()
	}
	if err != nil {
		w.Abort()
		return err
	}
	w.done, w.buf, w.spare = true, nil, nil
	return nil
}

// complete sends the last part and completes the multipart upload.
func (w *s3Writer) complete() error {
	if len(w.buf) > 0 {
		if err := w.sendPart(); err != nil {
			return err
		}
	}
	if err := w.wait(); err != nil {
		return err
	}
	out, err := w.s.client.CompleteMultipartUpload(w.ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &w.s.bucket, Key: aws.String(w.s.full(w.key)), UploadId: w.upload,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
		ChecksumType:    types.ChecksumTypeFullObject, ChecksumCRC32C: crc32cHeader(w.crc), MpuObjectSize: aws.Int64(w.size),
	})
	if err != nil {
		return w.s.wrap("complete upload of", w.key, err)
	}
	w.info = Info{Key: w.key, Size: w.size, ETag: aws.ToString(out.ETag)}
	w.info.CRC32C, w.info.HasCRC32C = fullCRC32C(out.ChecksumCRC32C, out.ChecksumType)
	return nil
}

// Abort waits for the part in flight and aborts the multipart upload, if
// one was started.
func (w *s3Writer) Abort() error {
	if w.done {
		return nil
	}
	_ = w.wait()
	w.done, w.buf, w.spare = true, nil, nil
	if w.upload == nil {
		return nil
	}
	_, err := w.s.client.AbortMultipartUpload(context.WithoutCancel(w.ctx), &s3.AbortMultipartUploadInput{
		Bucket: &w.s.bucket, Key: aws.String(w.s.full(w.key)), UploadId: w.upload,
	})
	return w.s.wrap("abort upload of", w.key, err)
}

// Upload is a multipart upload in progress.
type Upload struct {
	Key      string
	UploadID string
}

// Uploads lists the multipart uploads in progress under dir (keys relative
// to the store): an attempt that died mid-upload leaves one behind.
func (s *S3) Uploads(ctx context.Context, dir string) ([]Upload, error) {
	pfx := s.full(dir) + "/"
	in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &pfx}
	var out []Upload
	for {
		page, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return nil, s.wrap("list uploads under", dir+"/", err)
		}
		for _, u := range page.Uploads {
			rel := aws.ToString(u.Key)
			if s.prefix != "" {
				rel = rel[len(s.prefix)+1:]
			}
			out = append(out, Upload{Key: rel, UploadID: aws.ToString(u.UploadId)})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// AbortUpload aborts one multipart upload (a dead attempt's).
func (s *S3) AbortUpload(ctx context.Context, u Upload) error {
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: &s.bucket, Key: aws.String(s.full(u.Key)), UploadId: &u.UploadID,
	})
	return s.wrap("abort upload of", u.Key, err)
}

// Uploader is implemented by stores with multipart uploads that a dead
// writer can leave open (S3 keeps and bills their parts until aborted).
type Uploader interface {
	// Uploads lists the uploads in progress under dir.
	Uploads(ctx context.Context, dir string) ([]Upload, error)
	// AbortUpload aborts one of them.
	AbortUpload(ctx context.Context, u Upload) error
}
