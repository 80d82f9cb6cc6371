package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/walctl/walctl/internal/core/catchup"
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
// on its Pods (at most 63 bytes) and the prefix of their generated names
// (which Kubernetes truncates itself).
const (
	maxJobNameLen  = 63
	labelValueMax  = 63
	executionBytes = 16
)

// executionKey is a label-safe digest of the exact (table, Job name) pair.
func executionKey(spec catchup.JobSpec) string {
	sum := sha256.Sum256([]byte(spec.Table + "\x00" + spec.Name))
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

// validateName accepts a DNS-1123 label of at most maxJobNameLen bytes:
// the name becomes the Job's name, the job-name label of its Pods and the
// prefix of their generated names, an argument and an annotation.
func validateName(name string) error {
	if len(name) > maxJobNameLen {
		return fmt.Errorf("catch-up job name %q is %d bytes, at most %d allowed: %w", name, len(name), maxJobNameLen, errs.ErrInvalid)
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("catch-up job name %q: %s: %w", name, strings.Join(msgs, "; "), errs.ErrInvalid)
	}
	return nil
}

// identityLabels are the labels of an execution's Job and Pods.
func identityLabels(spec catchup.JobSpec) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByWalctl,
		LabelComponent: ComponentCatchup,
		LabelTable:     tableLabel(spec.Table),
		LabelKey:       executionKey(spec),
	}
}

// identityAnnotations carry the exact identity of an execution.
func identityAnnotations(spec catchup.JobSpec) map[string]string {
	return map[string]string{AnnotationTable: spec.Table, AnnotationJobID: spec.Name}
}

// isOurs reports whether an existing object carries exactly spec's identity.
func isOurs(labels, annotations map[string]string, spec catchup.JobSpec) bool {
	for k, v := range identityLabels(spec) {
		if labels[k] != v {
			return false
		}
	}
	return annotations[AnnotationTable] == spec.Table && annotations[AnnotationJobID] == spec.Name
}
