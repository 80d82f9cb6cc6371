package walreplica

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/walctl/walctl/internal/core/walflight"
)

const schemaJSON = `[{"name": "id", "type": "int64"}, {"name": "body", "type": "utf8"}]`

func writeSchema(t *testing.T, dir string) string {
	p := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(p, []byte(schemaJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func members(t *testing.T, c *cluster, group string) []walflight.Member {
	t.Helper()
	r := c.run("members-"+group, "wal", "members", "--group", group, "--output", "json")
	if r.Code != 0 {
		t.Fatalf("wal members: %s", r)
	}
	var ms []walflight.Member
	if err := json.Unmarshal([]byte(r.Stdout), &ms); err != nil {
		t.Fatalf("wal members JSON: %v\n%s", err, r.Stdout)
	}
	return ms
}

// A group of three started as an operator would (bootstrap one, add two)
// has three voters and one leader, and a table placed in it is created
// there.
func TestThreeReplicaGroupStartsAndPlacesATable(t *testing.T) {
	c := newCluster(t)
	c.group("g1", 3)
	ms := members(t, c, "g1")
	voters, leaders := 0, 0
	for _, m := range ms {
		if m.Voter {
			voters++
		}
		if m.Leader {
			leaders++
		}
	}
	if len(ms) != 3 || voters != 3 || leaders != 1 {
		t.Fatalf("members %+v: want 3 voters, 1 leader", ms)
	}
	schema := writeSchema(t, c.dir)
	if r := c.run("create", "table", "create", "--table", "orders", "--schema", schema, "--group", "g1"); r.Code != 0 {
		t.Fatalf("table create: %s", r)
	}
	if r := c.run("create-again", "table", "create", "--table", "orders", "--schema", schema, "--group", "g2"); r.Code != 2 {
		t.Fatalf("table create in an unconfigured group: %s; want exit 2", r)
	}
	if r := c.run("describe", "table", "describe", "orders", "--output", "json"); r.Code != 0 {
		t.Fatalf("table describe: %s", r)
	}
}
