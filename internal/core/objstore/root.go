package objstore

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Root is a parsed --lance-root: an S3 bucket and key prefix, or a local
// directory.
type Root struct {
	// Bucket and Prefix are set for s3://bucket/prefix.
	Bucket, Prefix string
	// Dir is set for a local directory.
	Dir string
}

// IsS3 tells whether the root is an S3 location.
func (r Root) IsS3() bool { return r.Bucket != "" }

// String returns the root as given (normalized).
func (r Root) String() string {
	if r.IsS3() {
		if r.Prefix == "" {
			return "s3://" + r.Bucket
		}
		return "s3://" + r.Bucket + "/" + r.Prefix
	}
	return r.Dir
}

// schemeRE matches a URL scheme of two letters or more ("C:" stays a path).
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]+:`)

// bucketRE is S3's bucket naming rule (3–63 lowercase letters, digits,
// dots and hyphens, starting and ending with a letter or digit).
var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// HasScheme tells whether s starts with a URL scheme (s3:, gs:, http: …)
// rather than being a local path.
func HasScheme(s string) bool { return schemeRE.MatchString(s) }

// ParseRoot parses a --lance-root. s3://bucket/prefix is an S3 root; a
// string without a scheme is a local directory; any other scheme (gs://,
// http://, file:…) is ErrUnsupportedRoot, never read as a path (write
// ./name for a directory whose name has a colon). A bucket that is not a
// valid S3 name and a prefix with "." or ".." segments are refused too.
func ParseRoot(s string) (Root, error) {
	if s == "" {
		return Root{}, fmt.Errorf("empty lance root: %w", ErrUnsupportedRoot)
	}
	scheme := schemeRE.FindString(s)
	if scheme == "" {
		return Root{Dir: s}, nil
	}
	if !strings.EqualFold(scheme, "s3:") {
		return Root{}, fmt.Errorf("%q: scheme %q is not supported (s3://bucket/prefix or a local directory; write ./%s for a directory named so): %w", s, strings.TrimSuffix(scheme, ":"), s, ErrUnsupportedRoot)
	}
	rest, ok := strings.CutPrefix(s[len(scheme):], "//")
	if !ok {
		return Root{}, fmt.Errorf("%q: an S3 root is s3://bucket/prefix: %w", s, ErrUnsupportedRoot)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if !bucketRE.MatchString(bucket) {
		return Root{}, fmt.Errorf("%q: bucket %q is not a valid S3 bucket name: %w", s, bucket, ErrUnsupportedRoot)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix != "" {
		for _, seg := range strings.Split(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return Root{}, fmt.Errorf("%q: key prefix %q has an empty, \".\" or \"..\" segment: %w", s, prefix, ErrUnsupportedRoot)
			}
		}
	}
	return Root{Bucket: bucket, Prefix: prefix}, nil
}

// Open returns the store of a parsed root; o configures an S3 root.
func Open(ctx context.Context, r Root, o S3Options) (Store, error) {
	if r.IsS3() {
		return NewS3(ctx, r.Bucket, r.Prefix, o)
	}
	return NewLocal(r.Dir), nil
}
