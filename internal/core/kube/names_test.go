package kube

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/walctl/walctl/internal/core/catchup"
	"github.com/walctl/walctl/internal/core/errs"
)

// The names catchup.JobName makes are the Job names: each is accepted,
// distinct tables (even those that sanitize alike) get distinct names, and
// every identity label is a valid label value.
func TestCatchupJobNamesAreValidJobNames(t *testing.T) {
	seen := map[string]string{}
	for _, table := range []string{"orders", "Orders", "a_b", "a-b", "___", "_lead", "trail-", "9lives",
		strings.Repeat("Z", 128), strings.Repeat("a_", 64)} {
		for _, attempt := range []int{1, 2, 99999999} {
			s := catchup.JobSpec{Table: table, Name: catchup.JobName("/walctl/v1", table, attempt)}
			if err := validateSpec(s); err != nil {
				t.Fatalf("%+v: %v", s, err)
			}
			if prev, dup := seen[s.Name]; dup {
				t.Errorf("%s and %s share name %q", prev, table, s.Name)
			}
			seen[s.Name] = table
			for k, v := range identityLabels(s) {
				if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
					t.Errorf("%+v: label %s=%q invalid: %v", s, k, v, msgs)
				}
			}
		}
	}
}

func TestJobSpecValidateRefusesHostileInput(t *testing.T) {
	bad := []catchup.JobSpec{
		{Table: "", Name: "x"},
		{Table: "a/b", Name: "x"},
		{Table: "../etc", Name: "x"},
		{Table: "-rf", Name: "x"},
		{Table: "a b", Name: "x"},
		{Table: strings.Repeat("a", 129), Name: "x"},
		{Table: "t", Name: ""},
		{Table: "t", Name: "-x"},
		{Table: "t", Name: ".x"},
		{Table: "t", Name: "X"},
		{Table: "t", Name: "a_b"},
		{Table: "t", Name: "a b"},
		{Table: "t", Name: "a/b"},
		{Table: "t", Name: "a\nb"},
		{Table: "t", Name: "--table=other"},
		{Table: "t", Name: strings.Repeat("j", 64)},
	}
	for _, s := range bad {
		if err := validateSpec(s); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: got %v, want errs.ErrInvalid", s, err)
		}
	}
}

func TestIsOursNeedsTheExactIdentity(t *testing.T) {
	s := catchup.JobSpec{Table: "orders", Name: "r1-a1"}
	l, a := identityLabels(s), identityAnnotations(s)
	if !isOurs(l, a, s) {
		t.Fatal("own identity not recognised")
	}
	for _, other := range []catchup.JobSpec{{Table: "Orders", Name: "r1-a1"}, {Table: "orders", Name: "r1-a2"}} {
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
