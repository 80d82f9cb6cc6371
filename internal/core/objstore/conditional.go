package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walctl/walctl/internal/core/errs"
)

// ErrChanged is a conditional operation refused because the key now holds
// another object than the one read.
var ErrChanged = fmt.Errorf("object changed since it was read: %w", errs.ErrConflict)

// Tagged is implemented by object stores whose objects carry an identity
// (an ETag): a record read can be compared with the one under its key, and
// removed only if it is still that one (a compare-and-delete).
type Tagged interface {
	// GetTagged reads an object and its ETag with one request, so both
	// describe the same object; a missing key is ErrNotFound.
	GetTagged(ctx context.Context, key string) ([]byte, string, error)
	// DeleteIfMatch removes key only if it still holds the object tagged
	// etag: ErrChanged when it holds another; a key already gone is no
	// error (S3 answers a delete of a missing key with success).
	DeleteIfMatch(ctx context.Context, key, etag string) error
}

// GetTagged reads an object and its ETag.
func (s *S3) GetTagged(ctx context.Context, key string) ([]byte, string, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key))})
	if err != nil {
		return nil, "", s.wrap("get", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", s.wrap("read", key, err)
	}
	return b, aws.ToString(out.ETag), nil
}

// DeleteIfMatch is a DeleteObject with If-Match: etag.
func (s *S3) DeleteIfMatch(ctx context.Context, key, etag string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.full(key)), IfMatch: aws.String(etag)})
	if err == nil {
		return nil
	}
	if statusOf(err) == http.StatusPreconditionFailed || codeOf(err) == "PreconditionFailed" {
		return fmt.Errorf("delete %s: %w", s.Join(key), ErrChanged)
	}
	if err = s.wrap("delete", key, err); errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
