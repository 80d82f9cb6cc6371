package kube

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/walctl/walctl/internal/core/errs"
)

func TestJobNameIsDeterministicSafeAndBounded(t *testing.T) {
	specs := []JobSpec{
		{Table: "orders", JobID: "r12-a1"},
		{Table: "Orders", JobID: "r12-a1"},
		{Table: "a_b", JobID: "r12-a1"},
		{Table: "a-b", JobID: "r12-a1"},
		{Table: "orders", JobID: "r12-a2"},
		{Table: "___", JobID: "x"},
		{Table: "_lead", JobID: "x"},
		{Table: "trail-", JobID: "x"},
		{Table: "9lives", JobID: "x"},
		{Table: strings.Repeat("Z", 128), JobID: strings.Repeat("j", 63)},
		{Table: strings.Repeat("a_", 64), JobID: "x.y_z-1"},
	}
	seen := map[string]JobSpec{}
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		name := JobName(s)
		if name != JobName(s) {
			t.Fatalf("%+v: name not deterministic", s)
		}
		if len(name) > maxJobNameLen {
			t.Errorf("%+v: name %q is %d bytes, want <= %d", s, name, len(name), maxJobNameLen)
		}
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			t.Errorf("%+v: name %q is not a DNS-1123 label: %v", s, name, msgs)
		}
		if !strings.HasPrefix(name, namePrefix) {
			t.Errorf("%+v: name %q lacks prefix %q", s, name, namePrefix)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("%+v and %+v share name %q", prev, s, name)
		}
		seen[name] = s
		for k, v := range identityLabels(s) {
			if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
				t.Errorf("%+v: label %s=%q invalid: %v", s, k, v, msgs)
			}
		}
	}
	if got := JobName(JobSpec{Table: "Orders_EU", JobID: "7"}); !strings.HasPrefix(got, "walctl-catchup-orders-eu-") {
		t.Errorf("readable part of %q: want walctl-catchup-orders-eu-<hash>", got)
	}
}

func TestJobSpecValidateRefusesHostileInput(t *testing.T) {
	bad := []JobSpec{
		{Table: "", JobID: "x"},
		{Table: "a/b", JobID: "x"},
		{Table: "../etc", JobID: "x"},
		{Table: "-rf", JobID: "x"},
		{Table: "a b", JobID: "x"},
		{Table: strings.Repeat("a", 129), JobID: "x"},
		{Table: "t", JobID: ""},
		{Table: "t", JobID: "-x"},
		{Table: "t", JobID: ".x"},
		{Table: "t", JobID: "a b"},
		{Table: "t", JobID: "a/b"},
		{Table: "t", JobID: "a\nb"},
		{Table: "t", JobID: "--table=other"},
		{Table: "t", JobID: strings.Repeat("j", 64)},
	}
	for _, s := range bad {
		if err := s.Validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%q: got %v, want errs.ErrInvalid", s, err)
		}
	}
}

func TestIsOursNeedsTheExactIdentity(t *testing.T) {
	s := JobSpec{Table: "orders", JobID: "r1-a1"}
	l, a := identityLabels(s), identityAnnotations(s)
	if !isOurs(l, a, s) {
		t.Fatal("own identity not recognised")
	}
	for _, other := range []JobSpec{{Table: "Orders", JobID: "r1-a1"}, {Table: "orders", JobID: "r1-a2"}} {
		if isOurs(l, a, other) {
			t.Errorf("%+v adopted a Job of %+v", other, s)
		}
	}
	delete(l, LabelManagedBy)
	if isOurs(l, a, s) {
		t.Error("Job without the managed-by label adopted")
	}
}

func TestTableLabelIsReadableWhenItCanBe(t *testing.T) {
	for table, want := range map[string]string{
		"Orders_EU":             "Orders_EU",
		"_staging":              "staging",
		"t-":                    "t",
		strings.Repeat("x", 64): strings.Repeat("x", 63),
		"a__b":                  "a__b",
	} {
		if got := tableLabel(table); got != want {
			t.Errorf("tableLabel(%q) = %q, want %q", table, got, want)
		}
	}
}
