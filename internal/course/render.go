package course

import (
	"bytes"
	"os"
	"slices"
	"strings"

	"github.com/charmbracelet/glamour"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// Render formats markdown for a terminal, word-wrapped at width columns (80 when width <= 0).
// plain asks for text with no ANSI escape sequences at all (glamour's "notty" style, for pipes
// and --plain); otherwise the style is GLAMOUR_STYLE when set (a standard style name or a JSON
// style file), else "dark". NO_COLOR keeps the layout but drops colors. Paragraphs are
// filled to the width whatever the line breaks of the source (see prepare).
func Render(markdown string, width int, plain bool) (string, error) {
	return render(markdown, width, plain, true)
}

// render is Render; fill false hands markdown to glamour as it is (for the tests that show
// what prepare is for).
func render(markdown string, width int, plain, fill bool) (string, error) {
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
	md, hyphens := markdown, false
	if fill {
		md, hyphens = prepare(dropComments(markdown))
	}
	out, err := r.Render(md)
	if err != nil {
		return "", err
	}
	if hyphens {
		out = strings.ReplaceAll(out, nbHyphen, "-")
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

// nbHyphen (U+2011, a non-breaking hyphen, one column wide) stands in for the hyphens of
// paragraph text while glamour lays it out; see prepare.
const nbHyphen = "\u2011"

// prepare makes md ready to be wrapped at any width; Render undoes the hyphen change in what
// glamour returns when hyphens says so.
//
// The lessons are hard-wrapped near 100 columns, and glamour (v1) wraps text twice: a
// paragraph with muesli/reflow's wordwrap, then the whole document again with x/ansi's. Two
// things made short lines inside paragraphs ("the\nwires") that no width avoids:
//
//   - a soft line break inside a list item is kept as a line break, so an item read at 80
//     columns alternates long and short lines. prepare puts each paragraph and each list
//     item's text on one line, joining its lines with one space, as CommonMark reads a soft
//     break. Code blocks, tables, headings, HTML blocks and hard breaks (two spaces or a
//     backslash at the end of a line) stay as written.
//   - reflow's wordwrap does not count the hyphens it breaks words at, so a line with a
//     hyphen in it comes out a column too long per hyphen, and the second wrap then moves its
//     last word onto a line of its own. prepare writes the hyphens of paragraph, list item and
//     heading text (code spans included) as U+2011, which neither wrapper breaks at, and Render
//     turns them back into "-" afterwards. A hyphenated word then moves to the next line
//     whole instead of being split at its hyphen. When md already holds a U+2011, hyphens are
//     left alone (and hyphens is false).
//
// md is parsed the way glamour parses it (GitHub Flavored Markdown, definition lists), so a
// table is never taken for a paragraph.
func prepare(md string) (out string, hyphens bool) {
	src := []byte(md)
	doc := goldmark.New(goldmark.WithExtensions(extension.GFM, extension.DefinitionList)).
		Parser().Parse(text.NewReader(src))
	hyphens = !strings.Contains(md, nbHyphen)
	type edit struct {
		from, to int
		with     string
	}
	var edits []edit
	// protect replaces the hyphens of the inline text under n.
	protect := func(n ast.Node) {
		_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
			t, ok := c.(*ast.Text)
			if !entering || !ok {
				return ast.WalkContinue, nil
			}
			for i := t.Segment.Start; i < t.Segment.Stop; i++ {
				if src[i] == '-' {
					edits = append(edits, edit{i, i + 1, nbHyphen})
				}
			}
			return ast.WalkContinue, nil
		})
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n.(type) {
		case *ast.Heading:
			if hyphens {
				protect(n)
			}
			return ast.WalkSkipChildren, nil
		case *ast.Paragraph, *ast.TextBlock:
		default:
			return ast.WalkContinue, nil
		}
		// Edits must come in source order: the line joins are collected with the hyphens.
		var joins []edit
		lines := n.Lines()
		for i := 0; i+1 < lines.Len(); i++ {
			cur, next := lines.At(i), lines.At(i+1)
			end := cur.Stop
			for end > cur.Start && (src[end-1] == '\n' || src[end-1] == '\r') {
				end--
			}
			if hardBreak(src[cur.Start:end]) || end >= next.Start {
				continue
			}
			for end > cur.Start && (src[end-1] == ' ' || src[end-1] == '\t') {
				end--
			}
			joins = append(joins, edit{end, next.Start, " "})
		}
		mark := len(edits)
		if hyphens {
			protect(n)
		}
		edits = append(edits, joins...)
		slices.SortFunc(edits[mark:], func(a, b edit) int { return a.from - b.from })
		return ast.WalkSkipChildren, nil
	})
	if len(edits) == 0 {
		return md, false
	}
	var b strings.Builder
	b.Grow(len(md) + 2*len(edits))
	at := 0
	for _, e := range edits {
		if e.from < at {
			continue // overlaps the edit before (never expected)
		}
		b.WriteString(md[at:e.from])
		b.WriteString(e.with)
		at = e.to
	}
	b.WriteString(md[at:])
	return b.String(), hyphens
}

// dropComments removes HTML comments ("<!-- measured: ... -->", notes for the course's
// authors) from md, outside code. glamour prints none of them, but a comment at the start of a
// line ends the paragraph it sits in (CommonMark's HTML block of type 2), so a placeholder
// inside a sentence broke the sentence into paragraphs of a line or two. A line left blank by
// its comment goes too; a comment between words takes one of the spaces around it along.
func dropComments(md string) string {
	if !strings.Contains(md, "<!--") {
		return md
	}
	src := []byte(md)
	doc := goldmark.New(goldmark.WithExtensions(extension.GFM, extension.DefinitionList)).
		Parser().Parse(text.NewReader(src))
	var cuts []span
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.HTMLBlock:
			if n.HTMLBlockType != ast.HTMLBlockType2 || n.Lines().Len() == 0 {
				return ast.WalkSkipChildren, nil
			}
			from, to := n.Lines().At(0).Start, n.Lines().At(n.Lines().Len()-1).Stop
			if n.HasClosure() {
				to = n.ClosureLine.Stop
			}
			cuts = append(cuts, commentCuts(src, from, to)...)
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			if n.Segments.Len() == 0 {
				return ast.WalkContinue, nil
			}
			from, to := n.Segments.At(0).Start, n.Segments.At(n.Segments.Len()-1).Stop
			if !bytes.HasPrefix(src[from:to], []byte("<!--")) {
				return ast.WalkContinue, nil
			}
			if from > 0 && src[from-1] == ' ' && to < len(src) && src[to] == ' ' {
				to++
			}
			cuts = append(cuts, span{from, to})
		}
		return ast.WalkContinue, nil
	})
	var b strings.Builder
	at := 0
	for _, c := range cuts {
		if c.from < at {
			continue
		}
		b.WriteString(md[at:c.from])
		at = c.to
	}
	b.WriteString(md[at:])
	return b.String()
}

// commentCuts are the byte ranges to remove from src[from:to], an HTML block of comments:
// each comment, and each line that holds nothing else (with its line break and indentation).
func commentCuts(src []byte, from, to int) []span {
	var cuts []span
	for at := from; at < to; {
		start := bytes.Index(src[at:to], []byte("<!--"))
		if start < 0 {
			break
		}
		start += at
		end := bytes.Index(src[start+4:to], []byte("-->"))
		if end < 0 {
			end = to
		} else {
			end += start + 4 + 3
		}
		// The whole line(s) when only blanks surround the comment.
		ls := bytes.LastIndexByte(src[:start], '\n') + 1
		le := end
		for le < len(src) && (src[le] == ' ' || src[le] == '\t' || src[le] == '\r') {
			le++
		}
		if len(bytes.TrimSpace(src[ls:start])) == 0 && (le == len(src) || src[le] == '\n') {
			start, end = ls, min(le+1, len(src))
		}
		cuts = append(cuts, span{start, end})
		at = max(end, at+1)
	}
	return cuts
}

// span is a range of bytes, from inclusive to exclusive.
type span struct{ from, to int }

// hardBreak reports whether a line of a paragraph ends in a hard line break: two or more
// spaces, or an odd number of backslashes.
func hardBreak(line []byte) bool {
	if len(line) >= 2 && line[len(line)-1] == ' ' && line[len(line)-2] == ' ' {
		return true
	}
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}
