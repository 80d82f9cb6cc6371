// Package s3accept holds the acceptance tests of Lance tables on object
// storage (issue 16) against a real S3 server (versitygw, started by
// internal/testutil/s3server), the real walctl binary as a process and the
// official LanceDB reader opening the tables straight from the bucket. Only
// its tests have content.
package s3accept
