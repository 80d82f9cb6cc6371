package exactlyonce

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/walctl/walctl/internal/core/lance/oracle"
)

// EnvOracleVersions is how many versions of each table the fault harnesses
// have the official LanceDB reader read again after walctl's managed reader
// audited them all: a number (default DefaultOracleVersions), or "all".
// Each read starts node (about half a second), so all of them is for a
// long run that can afford it.
const EnvOracleVersions = "WALCTL_ORACLE_VERSIONS"

// DefaultOracleVersions is the latest version and three spread over the
// others.
const DefaultOracleVersions = 4

// OracleVersionsFromEnv reads EnvOracleVersions: -1 stands for all.
func OracleVersionsFromEnv() (int, error) {
	s := os.Getenv(EnvOracleVersions)
	switch s {
	case "":
		return DefaultOracleVersions, nil
	case "all":
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive number or \"all\"", EnvOracleVersions, s)
	}
	return n, nil
}

// PickVersions chooses n of vs (all when n < 0 or n >= len(vs)): always
// the latest, the others evenly spread from the oldest.
func PickVersions(vs []Version, n int) []Version {
	if n < 0 || n >= len(vs) {
		return vs
	}
	if n == 0 {
		return nil
	}
	var out []Version
	for i := 0; i < n-1; i++ {
		out = append(out, vs[i*(len(vs)-1)/(n-1)])
	}
	return append(out, vs[len(vs)-1])
}

// CrossCheck reads each of vs with the official reader from the table at
// path and compares its ids, as a multiset, with what the managed reader
// saw.
func CrossCheck(ctx context.Context, o *oracle.Oracle, path string, vs []Version) []string {
	var f findings
	for _, v := range vs {
		ids, err := OracleIDsAt(ctx, o, path, v.Number)
		if err != nil {
			f.add("official reader, version %d: %v", v.Number, err)
			continue
		}
		if !sameMultiset(ids, v.IDs) {
			f.add("version %d: the official reader finds %d rows, walctl's managed reader %d, not the same ids", v.Number, len(ids), len(v.IDs))
		}
	}
	return f.done()
}

func sameMultiset(a, b []int64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
