package render

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Series is a chart's data: one value per step of Step seconds (NaN: no
// value at that step, drawn blank).
type Series struct {
	Title  string
	Unit   string
	Step   float64
	Values []float64
}

var eighths = []rune(" ▁▂▃▄▅▆▇█")

// Chart writes s as a plain-text column chart of height rows and at most
// width columns: each column is the largest value of the steps it covers,
// drawn in eighth blocks from 0 to the series' maximum, with the scale on
// the left and the time axis below. It uses no colour: the same text on a
// terminal and in a file.
func Chart(w io.Writer, s Series, width, height int) error {
	width, height = max(width, 1), max(height, 1)
	cols := columns(s.Values, width)
	top := 0.0
	for _, v := range cols {
		if !math.IsNaN(v) {
			top = max(top, v)
		}
	}
	label := func(v float64) string { return fmt.Sprintf("%8.2f", v) }
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n", s.Title, s.Unit)
	for row := height - 1; row >= 0; row-- {
		switch row {
		case height - 1:
			b.WriteString(label(top))
		case 0:
			b.WriteString(label(0))
		default:
			b.WriteString(strings.Repeat(" ", 8))
		}
		b.WriteString(" ┤")
		for _, v := range cols {
			b.WriteRune(cell(v, top, row, height))
		}
		b.WriteByte('\n')
	}
	b.WriteString(strings.Repeat(" ", 9) + "└" + strings.Repeat("─", len(cols)) + "\n")
	end := fmt.Sprintf("%.0fs", float64(len(s.Values))*s.Step)
	pad := max(len(cols)-len(end)-2, 1)
	b.WriteString(strings.Repeat(" ", 10) + "0s" + strings.Repeat(" ", pad) + end + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// columns folds values into at most width columns, each the largest
// value it covers (NaN when it covers none).
func columns(values []float64, width int) []float64 {
	n := len(values)
	if n <= width {
		return values
	}
	out := make([]float64, width)
	for c := range out {
		out[c] = math.NaN()
		for i := c * n / width; i < (c+1)*n/width; i++ {
			if v := values[i]; !math.IsNaN(v) && (math.IsNaN(out[c]) || v > out[c]) {
				out[c] = v
			}
		}
	}
	return out
}

// cell is the block drawn for value v in row (0 at the bottom) of a chart
// of height rows whose top is top: the value in eighths of a row, rounded
// up so that any positive value shows; a zero value shows a floor.
func cell(v, top float64, row, height int) rune {
	if math.IsNaN(v) {
		return ' '
	}
	units := 1
	if top > 0 && v > 0 {
		units = max(int(math.Ceil(v/top*float64(8*height))), 1)
	}
	switch k := units - 8*row; {
	case k >= 8:
		return eighths[8]
	case k <= 0:
		return ' '
	default:
		return eighths[k]
	}
}
