package render

import (
	"math"
	"strings"
	"testing"
)

// More steps than columns fold into columns of their largest value; a
// column with no value stays blank; the top row is the maximum.
func TestChartFoldsAndScales(t *testing.T) {
	nan := math.NaN()
	var b strings.Builder
	s := Series{Title: "t", Unit: "s", Step: 1, Values: []float64{1, 8, nan, nan, 2, 4}}
	if err := Chart(&b, s, 3, 2); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	// Columns: max(1,8)=8, blank, max(2,4)=4; two rows of 8 eighths each.
	if lines[0] != "t (s)" || lines[1] != "    8.00 ┤█  " || lines[2] != "    0.00 ┤█ █" || !strings.Contains(lines[4], "6s") {
		t.Fatalf("chart:\n%s", b.String())
	}
}
