package tui

import (
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// Markdown is rendered with glamour in a command, off the update loop, and again after the
// terminal is resized (debounced by the root model). Results are kept per key and width.

// renderedMsg carries a finished rendering.
type renderedMsg struct {
	key   string
	width int
	out   string
	err   error
}

// renderCmd renders md at width columns.
func renderCmd(key, md string, width int, plain bool) tea.Cmd {
	return func() tea.Msg {
		out, err := course.Render(md, width, plain)
		return renderedMsg{key: key, width: width, out: strings.Trim(out, "\n"), err: err}
	}
}

// renderCache keeps renderings by key; only the newest width of each key is kept.
type renderCache struct {
	m       map[string]renderedMsg
	pending map[string]int // key -> width asked for
}

func newRenderCache() *renderCache {
	return &renderCache{m: map[string]renderedMsg{}, pending: map[string]int{}}
}

// get returns the rendering of key at width, if there is one.
func (c *renderCache) get(key string, width int) (string, bool) {
	r, ok := c.m[key]
	if !ok || r.width != width {
		return "", false
	}
	if r.err != nil {
		return "(could not render this page: " + r.err.Error() + ")", true
	}
	return r.out, true
}

// stale returns the rendering of key at any width (shown while a new one is made).
func (c *renderCache) stale(key string) (string, bool) {
	r, ok := c.m[key]
	return r.out, ok && r.err == nil
}

// want returns a command that renders md for key at width unless that is done or under way.
func (c *renderCache) want(key, md string, width int, plain bool) tea.Cmd {
	if _, ok := c.get(key, width); ok {
		return nil
	}
	if c.pending[key] == width {
		return nil
	}
	c.pending[key] = width
	return renderCmd(key, md, width, plain)
}

// put stores a rendering; it reports whether it is one this cache asked for.
func (c *renderCache) put(r renderedMsg) bool {
	if w, ok := c.pending[r.key]; !ok || w != r.width {
		return false
	}
	delete(c.pending, r.key)
	c.m[r.key] = r
	return true
}

// wrapWidth is the width markdown is wrapped at for a body w columns wide: two columns are
// left for the search marks, and long lines are hard to read, so at most 100.
func wrapWidth(w int) int { return max(20, min(w-2, 100)) }
