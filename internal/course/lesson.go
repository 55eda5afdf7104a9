package course

import (
	"bytes"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"gopkg.in/yaml.v3"
)

// frontMatter is the YAML between the "---" lines at the top of a lesson.
type frontMatter struct {
	Title     string   `yaml:"title"`
	Exercises []string `yaml:"exercises"`
}

// parseLesson reads a lesson file. Problems go to errs; the returned node is the front matter's
// root mapping (lines already counted from the top of the file), nil when there is none.
func parseLesson(file string, data []byte, errs *ErrorList) (*Lesson, *yaml.Node) {
	src := strings.ReplaceAll(string(data), "\r\n", "\n")
	src = strings.TrimPrefix(src, "\ufeff")
	l := &Lesson{Path: file}
	lines := strings.SplitAfter(src, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], "\n") != "---" {
		errs.add(file, 1, "no front matter: a lesson starts with a \"---\" line, then \"title: ...\", then another \"---\" line")
		l.Body = src
		l.Pages = splitPages(l.Body, "")
		return l, nil
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if t := strings.TrimRight(lines[i], " \t\n"); t == "---" || t == "..." {
			end = i
			break
		}
	}
	if end < 0 {
		errs.add(file, 1, "front matter is never closed: add a \"---\" line after it")
		return l, nil
	}
	fm := strings.Join(lines[1:end], "")
	l.Body = strings.Join(lines[end+1:], "")
	var root *yaml.Node
	var meta frontMatter
	if strings.TrimSpace(fm) == "" {
		errs.add(file, 1, "front matter is empty: a lesson needs a title")
	} else {
		var clean bool
		root, clean = decodeYAML(file, []byte(fm), 1, &meta, errs)
		if clean && strings.TrimSpace(meta.Title) == "" {
			if child(root, "title") != nil {
				errs.add(file, lineOf(root, "title"), "title is empty")
			} else {
				errs.add(file, 1, "front matter has no title")
			}
		}
	}
	l.Title = strings.TrimSpace(meta.Title)
	l.Exercises = meta.Exercises
	l.Pages = splitPages(l.Body, l.Title)
	return l, root
}

// splitPages cuts markdown at its top-level ATX "## " headings. Headings inside fenced code,
// block quotes or lists, and setext headings, do not cut. The result always has a page.
func splitPages(md, title string) []Page {
	src := []byte(md)
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	type cut struct {
		at    int
		title string
	}
	var cuts []cut
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		h, ok := n.(*ast.Heading)
		if !ok || h.Level != 2 {
			continue
		}
		start := blockStart(h)
		if start < 0 {
			continue
		}
		ls := bytes.LastIndexByte(src[:start], '\n') + 1
		if !bytes.HasPrefix(bytes.TrimLeft(src[ls:], " "), []byte("##")) {
			continue // a setext heading: text underlined with "---"
		}
		cuts = append(cuts, cut{ls, strings.TrimSpace(inlineText(h, src))})
	}
	var pages []Page
	first := len(src)
	if len(cuts) > 0 {
		first = cuts[0].at
	}
	if intro := strings.TrimSpace(md[:first]); intro != "" || len(cuts) == 0 {
		p := Page{Title: title}
		if intro != "" {
			p.Markdown = intro + "\n"
		}
		pages = append(pages, p)
	}
	for i, c := range cuts {
		end := len(src)
		if i+1 < len(cuts) {
			end = cuts[i+1].at
		}
		pages = append(pages, Page{Title: c.title, Markdown: strings.TrimSpace(md[c.at:end]) + "\n"})
	}
	return pages
}

// blockStart is the source offset of a heading's text (or of the block), -1 when unknown.
func blockStart(h *ast.Heading) int {
	if h.Lines().Len() > 0 {
		return h.Lines().At(0).Start
	}
	return h.Pos()
}

// inlineText is the plain text of a node's inline children.
func inlineText(n ast.Node, src []byte) string {
	var b strings.Builder
	var walk func(ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch t := c.(type) {
			case *ast.Text:
				b.Write(t.Segment.Value(src))
				if t.SoftLineBreak() || t.HardLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.Write(t.Value)
			default:
				walk(c)
			}
		}
	}
	walk(n)
	return b.String()
}
