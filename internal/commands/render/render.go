// Package render turns a command's result into output: a lipgloss table on a
// terminal, plain aligned text when piped, or stable JSON for scripts. A
// command builds its result as plain data once and hands it here; text and
// JSON are two renderers of the same value.
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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

// Plain writes t as tab-aligned text with an upper-case header, the form
// that `grep`, `awk` and `cut` expect.
func Plain(w io.Writer, t *Table) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(t.Headers) > 0 {
		fmt.Fprintln(tw, strings.ToUpper(strings.Join(t.Headers, "\t")))
	}
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
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

// Pretty writes t as a bordered lipgloss table, for a terminal.
func Pretty(w io.Writer, t *Table) error {
	tbl := table.New().
		Border(lipgloss.RoundedBorder()).
		BorderStyle(lipgloss.NewStyle().Foreground(lipgloss.Color("8"))).
		Headers(t.Headers...).
		Rows(t.Rows...).
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
