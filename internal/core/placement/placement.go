// Package placement records which replicated WAL group holds each table
// (DESIGN.md §6 "WAL groups"). A table's group is chosen once, at
// `walctl table create --group G`, and written to etcd create-if-absent:
//
//	<prefix>/placement/<table>    {"kind":"placement","version":1,"group":"g1"}
//
// The record is never changed silently: recording a different group for a
// table that already has one fails with ErrPlacementConflict naming both.
// Every command that opens a table's WAL looks its group up here, then finds
// the group's members from configuration (wal.groups).
//
// Spreading one hot table's shards over several groups is later work: the
// record would then map shard ranges to groups, and the table's publisher
// epoch and trimmed-through positions would need one home group that every
// trim consults (the epoch CAS must stay a single linearizable register).
package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/walctl/walctl/internal/core/errs"
)

// ErrPlacementConflict means the table is already placed in another group.
var ErrPlacementConflict = fmt.Errorf("table placed in another WAL group: %w", errs.ErrConflict)

// ErrNoPlacement means the table has no placement record.
var ErrNoPlacement = fmt.Errorf("table has no WAL group placement: %w", errs.ErrNotFound)

// ErrUnknownKind means the record was written by a walctl this binary does
// not understand (DESIGN.md §3 rule 16: fail closed).
var ErrUnknownKind = fmt.Errorf("placement record of an unknown kind or version: %w", errs.ErrCorrupt)

const (
	recordKind    = "placement"
	recordVersion = 1
)

type record struct {
	Kind    string    `json:"kind"`
	Version int       `json:"version"`
	Group   string    `json:"group"`
	Created time.Time `json:"created"`
}

// Store reads and writes placement records under one etcd key prefix.
type Store struct {
	cli     *clientv3.Client
	prefix  string
	timeout time.Duration
}

// New returns a Store over cli under prefix (e.g. /walctl/v1); every call is
// bounded by timeout (the caller's --command-timeout).
func New(cli *clientv3.Client, prefix string, timeout time.Duration) *Store {
	return &Store{cli: cli, prefix: strings.TrimRight(prefix, "/"), timeout: timeout}
}

func (s *Store) key(table string) string { return s.prefix + "/placement/" + table }

// Record places table in group, create-if-absent in one linearizable
// transaction. Recording the same group again succeeds (idempotent, so an
// ambiguous outcome is resolved by calling it again); a different group
// fails with ErrPlacementConflict naming both groups. An etcd that does not
// answer in time is errs.ErrUnavailable.
func (s *Store) Record(ctx context.Context, table, group string) error {
	if table == "" || group == "" {
		return fmt.Errorf("placement needs a table and a group: %w", errs.ErrInvalid)
	}
	val, _ := json.Marshal(record{Kind: recordKind, Version: recordVersion, Group: group, Created: time.Now().UTC()})
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	k := s.key(table)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(val))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return s.etcdErr(err)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return fmt.Errorf("placement of table %q vanished during the transaction: %w", table, errs.ErrConflict)
	}
	have, err := decode(table, kvs[0].Value)
	if err != nil {
		return err
	}
	if have != group {
		return fmt.Errorf("table %q is placed in WAL group %q, not %q (placement never changes): %w", table, have, group, ErrPlacementConflict)
	}
	return nil
}

// Group returns the group table is placed in (a linearizable read), or
// ErrNoPlacement.
func (s *Store) Group(ctx context.Context, table string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key(table))
	if err != nil {
		return "", s.etcdErr(err)
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("table %q (created without --group, or not created): %w", table, ErrNoPlacement)
	}
	return decode(table, resp.Kvs[0].Value)
}

func decode(table string, b []byte) (string, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.Kind != recordKind || r.Version != recordVersion || r.Group == "" {
		return "", fmt.Errorf("table %q: placement record %q: %w", table, b, ErrUnknownKind)
	}
	return r.Group, nil
}

func (s *Store) etcdErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("etcd %s: placement: %v: %w", strings.Join(s.cli.Endpoints(), ","), err, errs.ErrUnavailable)
}
