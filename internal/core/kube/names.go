package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/walctl/walctl/internal/core/errs"
	"github.com/walctl/walctl/internal/core/wal"
)

// Labels and annotations the runner puts on every Job (and, through the
// template, on its Pods). The annotations carry the exact identity; labels
// are for selection and for people (label values cannot hold every table
// name, so the table label is a sanitized form).
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	LabelComponent   = "app.kubernetes.io/component"
	LabelTable       = "walctl.dev/table"
	LabelKey         = "walctl.dev/execution-key"
	AnnotationTable  = "walctl.dev/table"
	AnnotationJobID  = "walctl.dev/job-id"
	ManagedByWalctl  = "walctl"
	ComponentCatchup = "catchup"
	walctlKeyPrefix  = "walctl.dev/"
	managedKeyPrefix = "app.kubernetes.io/"
)

// Name length bounds. A Job's name becomes the value of the job-name label
// on its Pods (at most 63 bytes) and the prefix of their generated names;
// 52 leaves the room Kubernetes itself leaves for CronJob-made Jobs.
const (
	maxJobNameLen  = 52
	namePrefix     = "walctl-catchup-"
	hashLen        = 10
	maxJobIDLen    = 63
	maxTablePart   = maxJobNameLen - len(namePrefix) - 1 - hashLen
	labelValueMax  = 63
	executionBytes = 16
)

// JobName is the deterministic Job name of an execution:
// "walctl-catchup-<table>-<hash>", where <table> is a lower-cased, truncated,
// DNS-1123-safe form of the table name and <hash> is taken from SHA-256 of the
// exact (table, job id) pair, so two executions never share a name even when
// their sanitized tables do (Orders vs orders, a_b vs a-b). The result is a
// valid DNS-1123 label of at most 52 bytes.
func JobName(spec JobSpec) string {
	part := sanitize(spec.Table, maxTablePart)
	h := executionKey(spec)[:hashLen]
	if part == "" {
		return namePrefix + h
	}
	return namePrefix + part + "-" + h
}

// executionKey is a label-safe digest of the exact (table, job id) pair.
func executionKey(spec JobSpec) string {
	sum := sha256.Sum256([]byte(spec.Table + "\x00" + spec.JobID))
	return hex.EncodeToString(sum[:executionBytes])
}

// sanitize maps s onto [a-z0-9-], collapses runs of '-', trims '-' from both
// ends and truncates to max bytes.
func sanitize(s string, max int) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			c = '-'
		}
		if c == '-' {
			if dash || b.Len() == 0 {
				continue
			}
			dash = true
		} else {
			dash = false
		}
		b.WriteByte(c)
	}
	out := b.String()
	if len(out) > max {
		out = out[:max]
	}
	return strings.TrimRight(out, "-")
}

// tableLabel is a label value naming the table for people and selectors:
// the table itself when it is a valid label value, otherwise its sanitized
// form.
func tableLabel(table string) string {
	if len(table) <= labelValueMax && isAlnum(table[0]) && isAlnum(table[len(table)-1]) {
		return table // walctl table names only hold [A-Za-z0-9_-]
	}
	return sanitize(table, labelValueMax)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func validateTable(table string) error {
	if err := wal.ValidateName(table); err != nil {
		return fmt.Errorf("catch-up job: %w", err)
	}
	return nil
}

// validateJobID accepts 1 to 63 bytes of [A-Za-z0-9._-] not starting with
// '-' or '.': the id travels as a command-line argument, an environment value
// and an annotation, and must not be mistaken for a flag or a path.
func validateJobID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("catch-up job id is empty: %w", errs.ErrInvalid)
	case len(id) > maxJobIDLen:
		return fmt.Errorf("catch-up job id is %d bytes, at most %d allowed: %w", len(id), maxJobIDLen, errs.ErrInvalid)
	case id[0] == '-' || id[0] == '.':
		return fmt.Errorf("catch-up job id %q starts with %q: %w", id, id[0], errs.ErrInvalid)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("catch-up job id %q: byte %q at offset %d is not one of [A-Za-z0-9._-]: %w", id, c, i, errs.ErrInvalid)
		}
	}
	return nil
}

// identityLabels are the labels of an execution's Job and Pods.
func identityLabels(spec JobSpec) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByWalctl,
		LabelComponent: ComponentCatchup,
		LabelTable:     tableLabel(spec.Table),
		LabelKey:       executionKey(spec),
	}
}

// identityAnnotations carry the exact identity of an execution.
func identityAnnotations(spec JobSpec) map[string]string {
	return map[string]string{AnnotationTable: spec.Table, AnnotationJobID: spec.JobID}
}

// isOurs reports whether an existing object carries exactly spec's identity.
func isOurs(labels, annotations map[string]string, spec JobSpec) bool {
	for k, v := range identityLabels(spec) {
		if labels[k] != v {
			return false
		}
	}
	return annotations[AnnotationTable] == spec.Table && annotations[AnnotationJobID] == spec.JobID
}
