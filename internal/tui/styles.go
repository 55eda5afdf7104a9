package tui

import (
	"os"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// styles are the UI's lipgloss styles, bound to one renderer: with NoColor that renderer has the
// Ascii profile and every style renders as plain text.
type styles struct {
	title, crumb, heading, dim, bold, sel, ok, bad, warn, errLine, info, key, box, match lipgloss.Style
}

func newStyles(noColor bool) styles {
	r := lipgloss.NewRenderer(os.Stdout)
	if noColor {
		r.SetColorProfile(termenv.Ascii)
	}
	n := r.NewStyle
	return styles{
		title:   n().Bold(true).Foreground(lipgloss.Color("12")),
		crumb:   n().Foreground(lipgloss.Color("8")),
		heading: n().Bold(true).Underline(true),
		dim:     n().Foreground(lipgloss.Color("8")),
		bold:    n().Bold(true),
		sel:     n().Bold(true).Foreground(lipgloss.Color("14")),
		ok:      n().Foreground(lipgloss.Color("10")),
		bad:     n().Foreground(lipgloss.Color("9")),
		warn:    n().Foreground(lipgloss.Color("11")),
		errLine: n().Foreground(lipgloss.Color("9")).Bold(true),
		info:    n().Foreground(lipgloss.Color("14")),
		key:     n().Bold(true).Foreground(lipgloss.Color("13")),
		box:     n().Border(lipgloss.RoundedBorder()).Padding(0, 1),
		match:   n().Reverse(true),
	}
}

// verdict styles a verdict or status word.
func (st styles) verdict(v string) lipgloss.Style {
	switch v {
	case "passed", "ok", "done", "pass":
		return st.ok
	case "failed", "FAIL", "error", "hung", "signaled", "killed", "suspect", "unseen":
		return st.bad
	case "refused", "inconclusive", "running", "building":
		return st.warn
	}
	return st.dim
}
