package walflight

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walctl/walctl/internal/core/wal"
)

// Placement tells which WAL group holds a table (package placement, over
// etcd). A table without a record is an errs.ErrNotFound error.
type Placement interface {
	Group(ctx context.Context, table string) (string, error)
}

// Router is the wal.Log of a cluster of replicated WAL groups: each call
// goes to the group its table is placed in (looked up once per table, as
// placement never changes), through that group's GroupClient. A table placed
// in a group that is not configured fails with ErrUnknownGroup naming it.
type Router struct {
	groups    Groups
	placement Placement
	opts      ClientOptions

	mu      sync.Mutex
	clients map[string]*GroupClient
	tables  map[string]string
}

var _ wal.Log = (*Router)(nil)

// NewRouter returns a router over the configured groups; it contacts nobody
// until a call needs a group.
func NewRouter(groups Groups, placement Placement, opts ClientOptions) *Router {
	return &Router{groups: groups, placement: placement, opts: opts, clients: map[string]*GroupClient{}, tables: map[string]string{}}
}

// Group returns the client of a configured group.
func (r *Router) Group(name string) (*GroupClient, error) {
	addrs, err := r.groups.Members(name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[name]; ok {
		return c, nil
	}
	c, err := NewGroupClient(name, addrs, r.opts)
	if err != nil {
		return nil, err
	}
	r.clients[name] = c
	return c, nil
}

// For returns the client of the group table is placed in.
func (r *Router) For(ctx context.Context, table string) (*GroupClient, error) {
	r.mu.Lock()
	name, ok := r.tables[table]
	r.mu.Unlock()
	if !ok {
		var err error
		if name, err = r.placement.Group(ctx, table); err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.tables[table] = name
		r.mu.Unlock()
	}
	c, err := r.Group(name)
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", table, err)
	}
	return c, nil
}

// Close closes every group client.
func (r *Router) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for _, c := range r.clients {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CreateTable implements wal.Log in the table's group: the placement must
// have been recorded first (`table create --group`).
func (r *Router) CreateTable(ctx context.Context, name string, schema *arrow.Schema, shards int) (wal.TableInfo, error) {
	c, err := r.For(ctx, name)
	if err != nil {
		return wal.TableInfo{}, err
	}
	return c.CreateTable(ctx, name, schema, shards)
}

// Table implements wal.Log.
func (r *Router) Table(ctx context.Context, name string) (wal.TableInfo, error) {
	c, err := r.For(ctx, name)
	if err != nil {
		return wal.TableInfo{}, err
	}
	return c.Table(ctx, name)
}

// Tables implements wal.Log: every configured group's tables, by name.
func (r *Router) Tables(ctx context.Context) ([]wal.TableInfo, error) {
	var out []wal.TableInfo
	for _, name := range r.groups.Names() {
		c, err := r.Group(name)
		if err != nil {
			return nil, err
		}
		infos, err := c.Tables(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, infos...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Append implements wal.Log (see GroupClient.Append on ambiguous outcomes).
func (r *Router) Append(ctx context.Context, table string, shard int, rec arrow.RecordBatch) (uint64, error) {
	c, err := r.For(ctx, table)
	if err != nil {
		return 0, err
	}
	return c.Append(ctx, table, shard, rec)
}

// Seal implements wal.Log.
func (r *Router) Seal(ctx context.Context, table string, shard int) (wal.Generation, error) {
	c, err := r.For(ctx, table)
	if err != nil {
		return wal.Generation{}, err
	}
	return c.Seal(ctx, table, shard)
}

// Generations implements wal.Log.
func (r *Router) Generations(ctx context.Context, table string, shard int) ([]wal.Generation, error) {
	c, err := r.For(ctx, table)
	if err != nil {
		return nil, err
	}
	return c.Generations(ctx, table, shard)
}

// Read implements wal.Log.
func (r *Router) Read(ctx context.Context, table string, shard int, from, to uint64, fn func(wal.Entry) error) error {
	c, err := r.For(ctx, table)
	if err != nil {
		return err
	}
	return c.Read(ctx, table, shard, from, to, fn)
}

// Epoch implements wal.Log.
func (r *Router) Epoch(ctx context.Context, table string) (uint64, error) {
	c, err := r.For(ctx, table)
	if err != nil {
		return 0, err
	}
	return c.Epoch(ctx, table)
}

// AdvanceEpoch implements wal.Log.
func (r *Router) AdvanceEpoch(ctx context.Context, table string, expect uint64) (uint64, error) {
	c, err := r.For(ctx, table)
	if err != nil {
		return 0, err
	}
	return c.AdvanceEpoch(ctx, table, expect)
}

// Trim implements wal.Log.
func (r *Router) Trim(ctx context.Context, table string, shard int, through, epoch uint64) (uint64, error) {
	c, err := r.For(ctx, table)
	if err != nil {
		return 0, err
	}
	return c.Trim(ctx, table, shard, through, epoch)
}

// Stats implements wal.Log.
func (r *Router) Stats(ctx context.Context, table string, watermarks map[int]uint64) (wal.TableStats, error) {
	c, err := r.For(ctx, table)
	if err != nil {
		return wal.TableStats{}, err
	}
	return c.Stats(ctx, table, watermarks)
}
