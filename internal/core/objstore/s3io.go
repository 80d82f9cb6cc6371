package objstore

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/walctl/walctl/internal/core/failpoint"
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

// s3Writer streams an object through PartBuffers part buffers, charged
// whole to the caller's budget (BufferBytes). An object that fits them all
// is sent by a single PutObject at Commit: no multipart upload, so the
// store writes its bytes once (a multipart completion may copy every part
// again, as versitygw's posix backend does). A larger object becomes a
// multipart upload in which up to PartBuffers−1 full parts are uploading
// while the next one fills, so encoding overlaps the network and memory
// stays at PartBuffers parts. Every request carries the CRC-32C of its
// bytes, and a multipart upload asks for a FULL_OBJECT CRC-32C, so the
// store checks each part and keeps the checksum of the whole object, which
// a verifier then reads with one HEAD instead of downloading the object.
type s3Writer struct {
	ctx    context.Context
	s      *S3
	key    string
	buf    []byte   // filling
	held   [][]byte // full parts not sent yet (before a multipart upload starts)
	sums   []uint32 // the CRC-32C of each held part
	free   [][]byte // buffers of parts sent, for reuse
	bufs   int      // buffers allocated so far
	crc    uint32   // of every byte in full parts so far
	size   int64    // of those bytes
	upload *string
	parts  []types.CompletedPart
	// inflight are the parts uploading, oldest first.
	inflight []chan partResult
	done     bool
	err      error
	info     Info // once committed
}

type partResult struct {
	part types.CompletedPart
	body []byte
	err  error
}

// Create returns a streaming writer of key.
func (s *S3) Create(ctx context.Context, key string) (Writer, error) {
	return &s3Writer{ctx: ctx, s: s, key: key}, nil
}

// BufferBytes is every part buffer the writer may hold: the one filling,
// the ones uploading (or held for a single PutObject).
func (w *s3Writer) BufferBytes() int { return w.s.partBuffers * w.s.partSize }

// CRC32C is the checksum of the full parts so far and the bytes in the
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
		if w.buf == nil {
			if w.buf, w.err = w.buffer(); w.err != nil {
				return n, w.err
			}
		}
		k := min(len(p), w.s.partSize-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(w.buf) == w.s.partSize {
			if w.err = w.partFull(); w.err != nil {
				return n, w.err
			}
		}
	}
	return n, nil
}

// buffer returns an empty part buffer: a new one while fewer than
// PartBuffers exist, else the buffer of the oldest part in flight once it
// is sent.
func (w *s3Writer) buffer() ([]byte, error) {
	if len(w.free) == 0 && w.bufs < w.s.partBuffers {
		w.bufs++
		return make([]byte, 0, w.s.partSize), nil
	}
	if len(w.free) == 0 {
		if err := w.waitOldest(); err != nil {
			return nil, err
		}
	}
	b := w.free[len(w.free)-1]
	w.free = w.free[:len(w.free)-1]
	return b[:0], nil
}

// partFull takes the filled buffer: held while the object may still fit
// its buffers (one PutObject at Commit), else sent as the next part of the
// multipart upload, which starts with the held parts.
func (w *s3Writer) partFull() error {
	body := w.buf
	w.buf = nil
	sum := w.note(body)
	if w.upload == nil && len(w.held)+1 < w.s.partBuffers {
		w.held, w.sums = append(w.held, body), append(w.sums, sum)
		return nil
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
		for i, h := range w.held {
			w.sendPart(h, w.sums[i])
		}
		w.held, w.sums = nil, nil
	}
	w.sendPart(body, sum)
	return nil
}

// sendPart starts uploading body, the next part, whose CRC-32C is sum: the
// request carries it and the completion needs it.
func (w *s3Writer) sendPart(body []byte, sum uint32) {
	num := int32(len(w.parts) + len(w.inflight) + 1)
	ch := make(chan partResult, 1)
	w.inflight = append(w.inflight, ch)
	go func() {
		crc := crc32cHeader(sum)
		out, err := w.s.client.UploadPart(w.ctx, &s3.UploadPartInput{
			Bucket: &w.s.bucket, Key: aws.String(w.s.full(w.key)), UploadId: w.upload,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			ChecksumCRC32C: crc,
		})
		if err != nil {
			ch <- partResult{body: body, err: w.s.wrap(fmt.Sprintf("upload part %d of", num), w.key, err)}
			return
		}
		ch <- partResult{body: body, part: types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num), ChecksumCRC32C: crc}}
	}()
}

// waitOldest collects the oldest part in flight and frees its buffer.
func (w *s3Writer) waitOldest() error {
	r := <-w.inflight[0]
	w.inflight = w.inflight[1:]
	w.free = append(w.free, r.body)
	if r.err != nil {
		return r.err
	}
	w.parts = append(w.parts, r.part)
	return failpoint.Inject(w.ctx, failpoint.S3AfterPart, int(aws.ToInt32(r.part.PartNumber)))
}

// waitAll collects every part in flight and returns the first error.
func (w *s3Writer) waitAll() error {
	var first error
	for len(w.inflight) > 0 {
		if err := w.waitOldest(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// note adds b, the next bytes of the object, to its size and CRC-32C and
// returns b's own CRC-32C.
func (w *s3Writer) note(b []byte) uint32 {
	sum := crc32.Checksum(b, castagnoli)
	w.crc = crc32Combine(w.crc, sum, int64(len(b)))
	w.size += int64(len(b))
	return sum
}

// Commit sends the rest: one PutObject of the held parts and the filling
// buffer for an object that fits the buffers, or the last part and
// CompleteMultipartUpload with the whole object's CRC-32C (the store
// refuses it if the parts it holds do not add up to it). On error the
// upload is aborted.
func (w *s3Writer) Commit() error {
	if w.done {
		return fmt.Errorf("%s: already closed", w.s.Join(w.key))
	}
	err := w.err
	if err == nil && w.upload == nil {
		w.note(w.buf)
		body := append(w.held, w.buf)
		w.info, err = w.s.put(w.ctx, w.key, io.NewSectionReader(slices(body), 0, w.size), w.size, w.crc)
	} else if err == nil {
		err = w.complete()
	}
	if err != nil {
		w.Abort()
		return err
	}
	w.release()
	return nil
}

// release drops the buffers once the writer is done.
func (w *s3Writer) release() {
	w.done, w.buf, w.held, w.free = true, nil, nil, nil
}

// complete sends the last part and completes the multipart upload.
func (w *s3Writer) complete() error {
	if len(w.buf) > 0 {
		body := w.buf
		w.buf = nil
		w.sendPart(body, w.note(body))
	}
	if err := w.waitAll(); err != nil {
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

// Abort waits for the parts in flight and aborts the multipart upload, if
// one was started.
func (w *s3Writer) Abort() error {
	if w.done {
		return nil
	}
	_ = w.waitAll()
	w.release()
	if w.upload == nil {
		return nil
	}
	_, err := w.s.client.AbortMultipartUpload(context.WithoutCancel(w.ctx), &s3.AbortMultipartUploadInput{
		Bucket: &w.s.bucket, Key: aws.String(w.s.full(w.key)), UploadId: w.upload,
	})
	return w.s.wrap("abort upload of", w.key, err)
}

// slices reads consecutive byte slices as one (the body of a PutObject of
// held parts, without copying them into one buffer).
type slices [][]byte

func (s slices) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for _, b := range s {
		if off >= int64(len(b)) {
			off -= int64(len(b))
			continue
		}
		c := copy(p[n:], b[off:])
		n, off = n+c, 0
		if n == len(p) {
			return n, nil
		}
	}
	return n, io.EOF
}

// Upload is a multipart upload in progress.
type Upload struct {
	Key       string
	UploadID  string
	Initiated time.Time // when the store started it (zero if it does not say)
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
			out = append(out, Upload{Key: rel, UploadID: aws.ToString(u.UploadId), Initiated: aws.ToTime(u.Initiated)})
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
