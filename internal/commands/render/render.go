// Package render turns a command's result into output: a lipgloss table on a
// terminal, plain aligned text when piped, or stable JSON for scripts. A
// command builds its result as plain data once and hands it here; text and
// JSON are two renderers of the same value.
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
)

// Table is rows of cells under a header.
type Table struct {
	Headers []string
	Rows    [][]string
	// Status, when >= 0, names the column whose values ("ok", "fail", "warn",
	// …) are coloured on a terminal.
	Status int
}

// NewTable returns a table with the given headers and no status column.
func NewTable(headers ...string) *Table { return &Table{Headers: headers, Status: -1} }

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// JSON writes v as indented JSON followed by a newline.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Escape makes s safe to print on a terminal: control characters (C0, DEL,
// C1, line separators, bidirectional overrides) and invalid UTF-8 are
// written as Go escapes (\x1b, \u202e), so a field name or value can neither
// drive the terminal nor break a row. Everything else is left as is.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRune(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
		r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

func escapeAll(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = Escape(c)
	}
	return out
}

// Plain writes t as tab-aligned text with an upper-case header, the form
// that `grep`, `awk` and `cut` expect. Cells are escaped (Escape).
func Plain(w io.Writer, t *Table) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(t.Headers) > 0 {
		fmt.Fprintln(tw, strings.ToUpper(strings.Join(escapeAll(t.Headers), "\t")))
	}
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(escapeAll(r), "\t"))
	}
	return tw.Flush()
}

var (
	headerStyle = lipgloss.NewStyle().Bold(true).Padding(0, 1)
	cellStyle   = lipgloss.NewStyle().Padding(0, 1)
	statusStyle = map[string]lipgloss.Style{
		"ok":   cellStyle.Foreground(lipgloss.Color("2")),
		"warn": cellStyle.Foreground(lipgloss.Color("3")),
		"fail": cellStyle.Foreground(lipgloss.Color("1")).Bold(true),
	}
)

// Pretty writes t as a bordered lipgloss table, for a terminal. Cells are
// escaped (Escape).
func Pretty(w io.Writer, t *Table) error {
	rows := make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		rows[i] = escapeAll(r)
	}
	tbl := table.New().
		Border(lipgloss.RoundedBorder()).
		BorderStyle(lipgloss.NewStyle().Foreground(lipgloss.Color("8"))).
		Headers(escapeAll(t.Headers)...).
		Rows(rows...).
		StyleFunc(func(row, col int) lipgloss.Style {
			if row == table.HeaderRow {
				return headerStyle
			}
			if col == t.Status && row >= 0 && row < len(t.Rows) {
				if s, ok := statusStyle[t.Rows[row][col]]; ok {
					return s
				}
			}
			return cellStyle
		})
	_, err := fmt.Fprintln(w, tbl.Render())
	return err
}
