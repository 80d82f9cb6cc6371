package coord

import (
	"context"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// AuditEntry is one audit record with the key it is stored under.
type AuditEntry struct {
	Key string `json:"key"`
	AuditRecord
}

// Audit returns the audit records of operator actions (claim revocations),
// oldest first, those of table only when table is not "". It reads
// linearizably and writes nothing. A record of an unknown kind or schema
// version fails the whole read with ErrUnknownRecord naming its key; etcd
// errors wrap errs.ErrUnavailable; cancellation returns ctx's error.
func (c *Client) Audit(ctx context.Context, table string) ([]AuditEntry, error) {
	if table != "" {
		if err := ValidateTable(table); err != nil {
			return nil, err
		}
	}
	cctx, cancel := c.callCtx(ctx)
	resp, err := c.cli.Get(cctx, c.auditDir(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	cancel()
	if err != nil {
		return nil, c.unavailable(ctx, "read audit records", err)
	}
	out := []AuditEntry{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		// Keys end in -<table> (a cheap filter; table names may hold '-',
		// so the record's own table field decides).
		if table != "" && !strings.HasSuffix(key, "-"+table) {
			continue
		}
		var rec auditRecord
		if err := decodeRecord(key, kv.Value, KindAudit, &rec); err != nil {
			return nil, err
		}
		if table != "" && rec.Table != table {
			continue
		}
		out = append(out, AuditEntry{Key: key, AuditRecord: rec.AuditRecord})
	}
	return out, nil
}
