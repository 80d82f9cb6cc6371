package e2e

import (
	"strings"
	"testing"

	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
	"github.com/walctl/walctl/internal/core/objstore"
	"github.com/walctl/walctl/internal/testutil/s3server"
)

// newS3Cluster is newCluster with its Lance root in a bucket of a real S3
// server (versitygw): every walctl process gets the server's keys and
// endpoint through the standard AWS environment, and the official reader
// reads the tables straight from the bucket.
func newS3Cluster(t *testing.T) (*cluster, *s3server.Server) {
	t.Helper()
	c := newCluster(t)
	srv := s3server.Start(t, s3server.Options{Bucket: "e2e-bucket"})
	c.lance = srv.URL("lake")
	c.procs.Env = append(append(c.procs.Env, srv.Env()...), "WALCTL_S3_PATH_STYLE=true")
	c.official = oracletest.MustFind(t).WithStorage(oracle.S3Options(srv.Endpoint, s3server.Region, srv.AccessKey, srv.SecretKey))
	return c, srv
}

// Two `worker run` processes race for one table whose Lance dataset lives
// in the bucket, while a producer appends: every ACKed record is in the
// table exactly once, all columns intact, as the official reader reads it
// from the bucket.
func TestTwoWorkersRaceOnOneBucketTable(t *testing.T) {
	c, _ := newS3Cluster(t)
	p := c.raceTwoWorkers("orders", 43, 8)
	p.exactlyOnce()
	p.allColumnsMatch()
}

// The S3 server is SIGKILLed while a publisher is between the uploads of a
// plan's files, inside the multipart upload of a file larger than the S3
// writer's part buffers (a part sent, the upload not completed), and while
// it commits (its manifest staged, the conditional PUT not yet sent; and
// the PUT answered, its outcome not yet confirmed). The publisher fails;
// the server restarts on its directory; the next publish resolves what
// happened by re-reading and finishes: no record is lost or duplicated.
func TestS3ServerKilledMidUploadAndMidCommit(t *testing.T) {
	c, srv := newS3Cluster(t)
	// A fresh table: version 1 is its creation, 2 the fence, 3 the data
	// commit.
	for _, tc := range []struct{ table, point, spec string }{
		{"mid_upload", failpoint.AfterFilesPrepared, failpoint.AfterFilesPrepared + "=pause@1"},
		{"mid_commit_before_put", failpoint.BeforeManifestLink, at(failpoint.BeforeManifestLink, "pause", 3)},
		{"mid_commit_after_put", failpoint.AfterLinkBeforeDirSync, at(failpoint.AfterLinkBeforeDirSync, "pause", 3)},
	} {
		t.Run(tc.table, func(t *testing.T) {
			c := c.forT(t)
			c.createTable(tc.table)
			p := c.producer(tc.table, 47)
			for i := 0; i < 4; i++ {
				p.generation(2, 50)
			}
			killS3While(c, srv, tc.table, tc.point, tc.spec)
			expect(t, "publish after the restart", c.run("publish-again-"+tc.table, nil, "publish", "--table", tc.table), exitOK)
			p.exactlyOnce()
			p.allColumnsMatch()
		})
	}
	// The dead attempt's multipart upload outlives the server's restart;
	// the next publisher aborts it once its fence is in place (nothing
	// else would: the store keeps and bills its parts).
	t.Run("mid_multipart_upload", func(t *testing.T) {
		c := c.forT(t)
		const table = "mid_multipart_upload"
		c.createTable(table)
		p := c.producer(table, 53)
		// One sealed generation of about 22 MiB, so one data file larger
		// than the two 8 MiB part buffers: a multipart upload.
		p.p.Gen.StringBytes = 4 << 10
		p.append(0, 30, 200)
		p.seal(0)
		killS3While(c, srv, table, failpoint.S3AfterPart, failpoint.S3AfterPart+"=pause@1")
		store := tableStore(c, srv, table)
		ups, err := store.Uploads(c.ctx, "data")
		if err != nil || len(ups) != 1 {
			t.Fatalf("the dead attempt's multipart upload after the restart: %+v, %v", ups, err)
		}
		r := c.run("publish-again-"+table, nil, "publish", "--table", table)
		expect(t, "publish after the restart", r, exitOK)
		if !strings.Contains(r.Stderr, "aborted an abandoned upload") || !strings.Contains(r.Stderr, ups[0].Key) {
			t.Fatalf("the next publisher did not say it aborted %s:\n%s", ups[0].Key, r.Stderr)
		}
		if ups, err := store.Uploads(c.ctx, ""); err != nil || len(ups) != 0 {
			t.Fatalf("multipart uploads left under the table after the next publish: %+v, %v", ups, err)
		}
		p.exactlyOnce()
		p.allColumnsMatch()
	})
}

// killS3While starts a publish of table paused at failpoint point (spec
// enables it), SIGKILLs the S3 server there, lets the publisher go on and
// checks it fails, then restarts the server on its directory.
func killS3While(c *cluster, srv *s3server.Server, table, point, spec string) {
	c.t.Helper()
	pub := c.walctl("publish-"+table, fp(spec), "publish", "--table", table)
	pub.WaitPaused(point)
	srv.Kill()
	pub.Resume(point)
	if r := pub.Wait(); r.Code == 0 {
		c.t.Fatalf("publish went on with the S3 server dead: %s", r)
	}
	srv.Restart()
}

// tableStore is table's Lance dataset in the bucket, as a store.
func tableStore(c *cluster, srv *s3server.Server, table string) *objstore.S3 {
	c.t.Helper()
	s, err := objstore.NewS3(c.ctx, srv.Bucket, "lake/"+table+".lance", objstore.S3Options{
		Endpoint: srv.Endpoint, Region: s3server.Region, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}
