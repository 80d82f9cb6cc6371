package lancepb

import "sort"

// Operation numbers of lance.table.Transaction's oneof.
const (
	OpAppend       = 100
	OpDelete       = 101
	OpOverwrite    = 102
	OpCreateIndex  = 103
	OpRewrite      = 104
	OpUpdateConfig = 110
)

// Transaction is lance.table.Transaction, restricted to what walctl writes
// (Append, UpdateConfig) and what it needs to read back from any writer
// (read_version, uuid, operation kind).
type Transaction struct {
	ReadVersion uint64
	UUID        string
	// Op is the field number of the operation (OpAppend, ...).
	Op int
	// AppendFragments are the fragments of an Append.
	AppendFragments []Fragment
	// ConfigUpserts and ConfigDeletes describe an UpdateConfig. They are
	// written in the old-style fields (upsert_values, delete_keys), which
	// every Lance reader understands.
	ConfigUpserts map[string]string
	ConfigDeletes []string
	// OverwriteFields and OverwriteConfig describe an Overwrite that creates
	// an empty table (no fragments).
	OverwriteFields []Field
	OverwriteConfig map[string]string
	// Properties are transaction_properties.
	Properties map[string]string
	// RewriteOld and RewriteNew describe a Rewrite (a compaction) as one
	// rewrite group: the fragments replaced and those replacing them.
	RewriteOld, RewriteNew []Fragment
}

// Encode returns the wire form of t.
func (t *Transaction) Encode() []byte {
	var e Enc
	e.Uint(1, t.ReadVersion)
	e.String(2, t.UUID)
	e.StringMap(4, t.Properties, sortedKeys(t.Properties))
	switch t.Op {
	case OpAppend:
		e.Message(OpAppend, func(s *Enc) {
			for i := range t.AppendFragments {
				s.OptBytes(1, t.AppendFragments[i].Encode())
			}
		})
	case OpOverwrite:
		e.Message(OpOverwrite, func(s *Enc) {
			for i := range t.OverwriteFields {
				s.OptBytes(2, t.OverwriteFields[i].Encode())
			}
			s.StringMap(4, t.OverwriteConfig, sortedKeys(t.OverwriteConfig))
		})
	case OpRewrite:
		e.Message(OpRewrite, func(s *Enc) {
			s.Message(3, func(g *Enc) { // RewriteGroup
				for i := range t.RewriteOld {
					g.OptBytes(1, t.RewriteOld[i].Encode())
				}
				for i := range t.RewriteNew {
					g.OptBytes(2, t.RewriteNew[i].Encode())
				}
			})
		})
	case OpUpdateConfig:
		e.Message(OpUpdateConfig, func(s *Enc) {
			s.StringMap(1, t.ConfigUpserts, sortedKeys(t.ConfigUpserts))
			for _, k := range t.ConfigDeletes {
				s.String(2, k)
			}
		})
	}
	return e.B
}

// DecodeTransaction parses a lance.table.Transaction. Operation payloads other
// than Append's fragments are not decoded.
func DecodeTransaction(b []byte) (*Transaction, error) {
	t := &Transaction{}
	err := Walk(b, func(x WireField) error {
		switch {
		case x.Num == 1:
			t.ReadVersion = x.U
		case x.Num == 2:
			t.UUID = string(x.B)
		case x.Num == 4:
			k, v, err := x.MapEntry()
			if err != nil {
				return err
			}
			if t.Properties == nil {
				t.Properties = map[string]string{}
			}
			t.Properties[k] = string(v)
		case x.Num >= 100 && x.Num < 200:
			t.Op = int(x.Num)
			if x.Num == OpAppend {
				return Walk(x.B, func(y WireField) error {
					if y.Num != 1 {
						return nil
					}
					f, err := DecodeFragment(y.B)
					t.AppendFragments = append(t.AppendFragments, f)
					return err
				})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
