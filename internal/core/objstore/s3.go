package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/walctl/walctl/internal/core/errs"
)

// S3Options configure an S3 store. Empty fields fall back to the standard
// AWS configuration chain (AWS_* environment, shared config and
// credentials files, instance roles).
type S3Options struct {
	// Endpoint is the store's URL (http://127.0.0.1:7070 for a local
	// server); empty means AWS (or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL).
	Endpoint string
	// Region is the signing region; us-east-1 when nothing sets one.
	Region string
	// PathStyle addresses the bucket in the path, as most S3-compatible
	// servers need.
	PathStyle bool
	// AccessKey and SecretKey are static credentials (both or neither).
	AccessKey, SecretKey string
	// PartSize is the multipart part (and part buffer) size;
	// DefaultPartSize if zero, never below MinPartSize.
	PartSize int
	// PartBuffers is how many part buffers a streaming writer holds
	// (DefaultPartBuffers if zero, at least 2): an object that fits them
	// is sent by one PutObject, a larger one has up to PartBuffers−1
	// parts uploading while the next fills.
	PartBuffers int
	// CallTimeout bounds each HTTP request (one attempt, its body
	// included); no bound if zero. A conditional create that runs out of
	// it is an unknown outcome.
	CallTimeout time.Duration
}

// Multipart part sizes. S3 refuses parts under 5 MiB except the last.
const (
	DefaultPartSize = 8 << 20
	MinPartSize     = 5 << 20
)

// DefaultPartBuffers is a streaming writer's part buffers when none is
// configured: one filling while one uploads.
const DefaultPartBuffers = 2

// S3 is a store over one bucket and key prefix of an S3-compatible server.
type S3 struct {
	client      *s3.Client
	bucket      string
	prefix      string // "" or ends without a slash
	endpoint    string
	partSize    int
	partBuffers int
}

// NewS3 returns the store for bucket/prefix. It sends no request: a wrong
// bucket or wrong credentials show at the first call, named there.
func NewS3(ctx context.Context, bucket, prefix string, o S3Options) (*S3, error) {
	if (o.AccessKey == "") != (o.SecretKey == "") {
		return nil, fmt.Errorf("s3://%s: an access key needs a secret key and the other way round: %w", bucket, errs.ErrInvalid)
	}
	var loads []func(*config.LoadOptions) error
	if o.Region != "" {
		loads = append(loads, config.WithRegion(o.Region))
	}
	if o.AccessKey != "" {
		loads = append(loads, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKey, o.SecretKey, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("s3://%s: AWS configuration: %w: %w", bucket, errs.ErrInvalid, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if o.CallTimeout > 0 {
		cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(o.CallTimeout)
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	ps := o.PartSize
	if ps == 0 {
		ps = DefaultPartSize
	}
	ps = max(ps, MinPartSize)
	pb := o.PartBuffers
	if pb == 0 {
		pb = DefaultPartBuffers
	}
	pb = max(pb, 2)
	endpoint := o.Endpoint
	if endpoint == "" {
		endpoint = "AWS " + cfg.Region
		// The client's, not cfg's: only the client resolves the
		// service-specific AWS_ENDPOINT_URL_S3.
		if be := client.Options().BaseEndpoint; be != nil {
			endpoint = *be
		}
	}
	return &S3{client: client, bucket: bucket, prefix: strings.Trim(prefix, "/"), endpoint: endpoint, partSize: ps, partBuffers: pb}, nil
}

// String returns s3://bucket/prefix.
func (s *S3) String() string { return "s3://" + path.Join(s.bucket, s.prefix) }

// Join returns s3://bucket/prefix/key.
func (s *S3) Join(key string) string { return "s3://" + s.bucket + "/" + s.full(key) }

// Local returns "": an S3 store has no directory.
func (s *S3) Local() string { return "" }

// Sub returns the store rooted at prefix.
func (s *S3) Sub(prefix string) Store {
	c := *s
	c.prefix = s.full(prefix)
	return &c
}

func (s *S3) full(key string) string {
	key = strings.Trim(key, "/")
	switch {
	case s.prefix == "":
		return key
	case key == "" || key == ".":
		return s.prefix
	}
	return s.prefix + "/" + key
}

func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func codeOf(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// wrap names the object, bucket and endpoint (never a secret) and maps the
// server's answer onto walctl's sentinels: a missing key is ErrNotFound; a
// missing bucket, refused credentials or an unreachable server are
// dependency errors (exit 5).
func (s *S3) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("%s %s (endpoint %s)", op, s.Join(key), s.endpoint)
	code, status := codeOf(err), statusOf(err)
	switch {
	case code == "NoSuchBucket":
		return fmt.Errorf("%s: bucket %q does not exist: %w", where, s.bucket, errs.ErrUnavailable)
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return fmt.Errorf("%s: %w", where, ErrNotFound)
	case status == http.StatusForbidden || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied":
		return fmt.Errorf("%s: access refused (%s): check the access key and secret: %w", where, code, errs.ErrUnavailable)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", where, err)
	}
	return fmt.Errorf("%s: %w: %w", where, errs.ErrUnavailable, err)
}

// Get reads a whole object.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key))})
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return b, s.wrap("read", key, err)
}

// Stat describes an object: a HEAD that asks for its checksums
// (ChecksumMode ENABLED), so the CRC-32C the store keeps is in the answer.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key)), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return Info{}, s.wrap("stat", key, err)
	}
	in := Info{Key: key, Size: aws.ToInt64(out.ContentLength), Modified: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag)}
	in.CRC32C, in.HasCRC32C = fullCRC32C(out.ChecksumCRC32C, out.ChecksumType)
	return in, nil
}

// List returns the objects directly under dir.
func (s *S3) List(ctx context.Context, dir string) ([]Info, error) {
	pfx := s.full(dir)
	if pfx != "" {
		pfx += "/"
	}
	base := strings.Trim(dir, "/")
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &pfx, Delimiter: aws.String("/")})
	var out []Info
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", dir+"/", err)
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), pfx)
			if name == "" || strings.Contains(name, "/") {
				continue
			}
			out = append(out, Info{Key: joinKey(base, name), Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ListTree returns the objects under dir at any depth.
func (s *S3) ListTree(ctx context.Context, dir string) ([]Info, error) {
	pfx := s.full(dir)
	if pfx != "" {
		pfx += "/"
	}
	base := strings.Trim(dir, "/")
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &pfx})
	var out []Info
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", dir+"/", err)
		}
		for _, o := range page.Contents {
			if name := strings.TrimPrefix(aws.ToString(o.Key), pfx); name != "" {
				out = append(out, Info{Key: joinKey(base, name), Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// PutIfAbsent is a PutObject with If-None-Match: *, sent once (the SDK's
// retries are off for it: a retry of a request that landed would be
// refused and read as a lost race). 412 and 409 are ErrExists; any other
// failure after the request may have reached the server (a 5xx, a
// timeout, a broken connection) is ErrUnknownOutcome.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte, h *Hooks) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if h != nil && h.BeforePublish != nil {
		if err := h.BeforePublish(ctx); err != nil {
			return err
		}
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: aws.String(s.full(key)), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: aws.String("*"),
		ChecksumCRC32C: crc32cHeader(crc32.Checksum(data, castagnoli)),
	}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return s.putIfAbsentError(key, err)
	}
	if h != nil && h.AfterPublish != nil {
		if err := h.AfterPublish(ctx); err != nil {
			return fmt.Errorf("%s: %w: %w", s.Join(key), ErrUnknownOutcome, err)
		}
	}
	return nil
}

func (s *S3) putIfAbsentError(key string, err error) error {
	status, code := statusOf(err), codeOf(err)
	switch {
	case status == http.StatusPreconditionFailed || status == http.StatusConflict ||
		code == "PreconditionFailed" || code == "ConditionalRequestConflict":
		return fmt.Errorf("%s: %w", s.Join(key), ErrExists)
	case status >= 400 && status < 500:
		return s.wrap("put", key, err) // refused: nothing was written
	}
	return fmt.Errorf("put %s (endpoint %s): %w: %w", s.Join(key), s.endpoint, ErrUnknownOutcome, err)
}

// Put writes an object (retried by the SDK: the key is the writer's own).
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.put(ctx, key, bytes.NewReader(data), int64(len(data)), crc32.Checksum(data, castagnoli))
	return err
}

// put is one PutObject of size bytes from body, whose CRC-32C is sum: the
// store checks it against the bytes it receives (a mismatch is refused,
// BadDigest) and keeps it. It returns the object as the store answered.
func (s *S3) put(ctx context.Context, key string, body io.ReadSeeker, size int64, sum uint32) (Info, error) {
	out, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: aws.String(s.full(key)), Body: body,
		ContentLength: aws.Int64(size), ChecksumCRC32C: crc32cHeader(sum),
	})
	if err != nil {
		return Info{}, s.wrap("put", key, err)
	}
	in := Info{Key: key, Size: size, ETag: aws.ToString(out.ETag)}
	in.CRC32C, in.HasCRC32C = fullCRC32C(out.ChecksumCRC32C, out.ChecksumType)
	return in, nil
}

// Delete removes an object; a missing one is not an error.
func (s *S3) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key))})
	if err = s.wrap("delete", key, err); errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// MakeDirs is a no-op: an object store has no directories.
func (s *S3) MakeDirs(context.Context, ...string) error { return nil }

// SyncDirs is a no-op: a completed PUT is durable.
func (s *S3) SyncDirs(context.Context, ...string) error { return nil }
