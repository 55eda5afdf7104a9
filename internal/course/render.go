package course

import (
	"os"
	"strings"

	"github.com/charmbracelet/glamour"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// Render formats markdown for a terminal, word-wrapped at width columns (80 when width <= 0).
// plain asks for text with no ANSI escape sequences at all (glamour's "notty" style, for pipes
// and --plain); otherwise the style is GLAMOUR_STYLE when set (a standard style name or a JSON
// style file), else "dark". NO_COLOR keeps the layout but drops colors.
func Render(markdown string, width int, plain bool) (string, error) {
	if width <= 0 {
		width = 80
	}
	opts := []glamour.TermRendererOption{glamour.WithWordWrap(width)}
	if plain {
		opts = append(opts, glamour.WithStandardStyle("notty"), glamour.WithColorProfile(termenv.Ascii))
	} else {
		style := os.Getenv("GLAMOUR_STYLE")
		if style == "" {
			style = "dark"
		}
		opts = append(opts, glamour.WithStylePath(style), glamour.WithColorProfile(colorProfile()))
	}
	r, err := glamour.NewTermRenderer(opts...)
	if err != nil {
		return "", err
	}
	out, err := r.Render(markdown)
	if err != nil {
		return "", err
	}
	if plain {
		// No escapes, and none of the padding glamour adds to fill each line to the width.
		lines := strings.Split(ansi.Strip(out), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " ")
		}
		out = strings.Join(lines, "\n")
	}
	return out, nil
}

// colorProfile picks the colors for styled output from the environment alone: the caller
// already decided the output is a terminal by asking for it.
func colorProfile() termenv.Profile {
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		return termenv.Ascii
	}
	switch strings.ToLower(os.Getenv("COLORTERM")) {
	case "truecolor", "24bit":
		return termenv.TrueColor
	}
	switch term := os.Getenv("TERM"); {
	case term == "dumb":
		return termenv.Ascii
	case term == "linux" || term == "vt100":
		return termenv.ANSI
	}
	return termenv.ANSI256
}
