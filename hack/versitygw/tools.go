//go:build tools

// Tools module: pins a real S3-compatible server, versitygw, which the test
// harness internal/testutil/s3server runs on loopback (`make versitygw`
// builds it into bin/). Nothing here is compiled into walctl.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
