package e2e

import (
	"testing"

	"github.com/walctl/walctl/internal/core/failpoint"
	"github.com/walctl/walctl/internal/core/lance/oracle"
	"github.com/walctl/walctl/internal/core/lance/oracle/oracletest"
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
// plan's files, and while it commits (its manifest staged, the conditional
// PUT not yet sent; and the PUT answered, its outcome not yet confirmed).
// The publisher fails; the server restarts on its directory; the next
// publish resolves what happened by re-reading and finishes: no record is
// lost or duplicated.
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
			pub := c.walctl("publish-"+tc.table, fp(tc.spec), "publish", "--table", tc.table)
			pub.WaitPaused(tc.point)
			srv.Kill()
			pub.Resume(tc.point)
			if r := pub.Wait(); r.Code == 0 {
				t.Fatalf("publish went on with the S3 server dead: %s", r)
			}
			srv.Restart()
			expect(t, "publish after the restart", c.run("publish-again-"+tc.table, nil, "publish", "--table", tc.table), exitOK)
			p.exactlyOnce()
			p.allColumnsMatch()
		})
	}
}
