package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

// pageRef is one page of the pager: a lesson and the index of one of its pages.
type pageRef struct {
	lesson *course.Lesson
	page   int
}

// isSection reports whether a page is a "## " section (else it is the text before the first).
func isSection(p course.Page) bool { return strings.HasPrefix(p.Markdown, "## ") }

func (r pageRef) key() string { return fmt.Sprintf("lesson:%s#%d", r.lesson.ID, r.page) }

// markdown is the page's text; a lesson's first page starts with the lesson's title.
func (r pageRef) markdown() string {
	md := r.lesson.Pages[r.page].Markdown
	if r.page == 0 {
		md = "# " + r.lesson.Title + "\n\n" + md
	}
	return md
}

// pagerView shows a module's lessons one page at a time.
type pagerView struct {
	s     *session
	w, h  int
	mod   *course.Module
	pages []pageRef
	cur   int
	vp    viewport.Model
	cache *renderCache
	lines []string // the current page as rendered, before search marks
	shown string   // key of the page in the viewport

	searching bool
	input     textinput.Model
	query     string
	matches   []int // line numbers of the current page holding the query
	match     int   // index into matches

	toc       bool
	tocCursor int
}

func newPagerView(s *session) *pagerView {
	in := textinput.New()
	in.Prompt = "/"
	in.Placeholder = "search this page"
	in.CharLimit = 80
	in.Cursor.SetMode(cursor.CursorStatic)
	vp := viewport.New(0, 0)
	vp.KeyMap = scrollKeys()
	return &pagerView{s: s, vp: vp, cache: newRenderCache(), input: in}
}

// open shows lesson l at the page the learner read last.
func (p *pagerView) open(l *course.Lesson) tea.Cmd {
	mod := p.s.course.Module(l.ModuleID)
	p.mod = mod
	p.pages = p.pages[:0]
	lessons := []*course.Lesson{l}
	if mod != nil {
		lessons = mod.Lessons
	}
	for _, ml := range lessons {
		for i := range ml.Pages {
			p.pages = append(p.pages, pageRef{ml, i})
		}
	}
	page := 0
	if p.s.progress != nil {
		page = p.s.progress.LessonPage[l.ID]
	}
	page = max(0, min(page, len(l.Pages)-1))
	p.cur = 0
	for i, r := range p.pages {
		if r.lesson == l && r.page == page {
			p.cur = i
		}
	}
	p.toc, p.searching, p.query, p.matches = false, false, "", nil
	p.shown = ""
	return p.show()
}

func (p *pagerView) SetSize(w, h int) {
	p.w, p.h = w, h
	p.layout()
}

func (p *pagerView) layout() {
	h := p.h - 1 // the heading line
	if p.searching {
		h--
	}
	p.vp.Width, p.vp.Height = p.w, max(1, h)
	p.input.Width = max(10, p.w-4)
}

// reflow renders the current page again at the current width (after a resize).
func (p *pagerView) reflow() tea.Cmd {
	if len(p.pages) == 0 {
		return nil
	}
	return p.show()
}

func (p *pagerView) page() pageRef { return p.pages[p.cur] }

// show puts the current page in the viewport, or asks for its rendering.
func (p *pagerView) show() tea.Cmd {
	if len(p.pages) == 0 || p.w == 0 {
		return nil
	}
	r := p.page()
	ww := wrapWidth(p.w)
	out, ok := p.cache.get(r.key(), ww)
	if !ok {
		if old, ok := p.cache.stale(r.key()); ok && p.shown == r.key() {
			p.setLines(old, false)
		} else if p.shown != r.key() {
			p.lines = []string{"", "  rendering…"}
			p.vp.SetContent(strings.Join(p.lines, "\n"))
			p.vp.GotoTop()
		}
		return p.cache.want(r.key(), r.markdown(), ww, p.s.plain)
	}
	p.setLines(out, p.shown != r.key())
	p.shown = r.key()
	return nil
}

func (p *pagerView) setLines(out string, top bool) {
	p.lines = strings.Split(out, "\n")
	p.findMatches()
	p.paint()
	if top {
		p.vp.GotoTop()
	}
}

// rendered takes a finished rendering; it reports whether it was one of the pager's.
func (p *pagerView) rendered(msg renderedMsg) (bool, tea.Cmd) {
	if !p.cache.put(msg) {
		return false, nil
	}
	if len(p.pages) > 0 && msg.key == p.page().key() {
		return true, p.show()
	}
	return true, nil
}

// paint fills the viewport: a two-column gutter marks lines that match the search ("▶" the
// current match), and with colours the matches are shown reversed.
func (p *pagerView) paint() {
	marks := map[int]string{}
	for i, ln := range p.matches {
		if i == p.match {
			marks[ln] = "▶ "
		} else if marks[ln] == "" {
			marks[ln] = "• "
		}
	}
	out := make([]string, len(p.lines))
	for i, l := range p.lines {
		g, ok := marks[i]
		if !ok {
			g = "  "
		} else if !p.s.plain {
			l = highlight(ansi.Strip(l), p.query, p.s.st.match.Render)
		}
		out[i] = g + l
	}
	p.vp.SetContent(strings.Join(out, "\n"))
}

// highlight wraps every case-insensitive occurrence of q in s with style.
func highlight(s, q string, style func(...string) string) string {
	if q == "" {
		return s
	}
	lower, lq := strings.ToLower(s), strings.ToLower(q)
	if len(lower) != len(s) {
		return s // case folding changed the length: do not guess offsets
	}
	var b strings.Builder
	for {
		i := strings.Index(lower, lq)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(style(s[i : i+len(q)]))
		s, lower = s[i+len(q):], lower[i+len(q):]
	}
}

func (p *pagerView) findMatches() {
	p.matches = nil
	if p.query == "" {
		return
	}
	q := strings.ToLower(p.query)
	for i, l := range p.lines {
		if strings.Contains(strings.ToLower(ansi.Strip(l)), q) {
			p.matches = append(p.matches, i)
		}
	}
	p.match = 0
}

// jumpToMatch scrolls the current match into view, a couple of lines from the top.
func (p *pagerView) jumpToMatch() {
	if len(p.matches) == 0 {
		return
	}
	p.paint()
	p.vp.SetYOffset(max(0, p.matches[p.match]-2))
}

// searchStatus says where the search stands, for the status line.
func (p *pagerView) searchStatus() string {
	if p.query == "" {
		return ""
	}
	if len(p.matches) == 0 {
		return fmt.Sprintf("no match for %q on this page", p.query)
	}
	return fmt.Sprintf("match %d of %d for %q (n/N: next/previous, esc: clear)", p.match+1, len(p.matches), p.query)
}

// turn moves to page i and saves it as the lesson's last page read.
func (p *pagerView) turn(i int) tea.Cmd {
	if i < 0 || i >= len(p.pages) || i == p.cur {
		return nil
	}
	p.cur = i
	p.savePage()
	return p.show()
}

func (p *pagerView) savePage() {
	r := p.page()
	if p.s.progress != nil {
		if v, ok := p.s.progress.LessonPage[r.lesson.ID]; ok && v == r.page {
			return
		}
	}
	if err := p.s.update(func(pr *workspace.Progress) {
		pr.LessonPage[r.lesson.ID] = r.page
	}); err != nil {
		p.s.flashErr("could not save your place: " + err.Error())
	}
}

// typing reports whether keys go to a text field.
func (p *pagerView) typing() bool { return p.searching }

func (p *pagerView) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	if p.searching {
		switch k.String() {
		case "enter":
			p.searching = false
			p.input.Blur()
			p.query = strings.TrimSpace(p.input.Value())
			p.layout()
			p.findMatches()
			// Start from the first match at or below the top of the screen.
			for i, ln := range p.matches {
				if ln >= p.vp.YOffset {
					p.match = i
					break
				}
			}
			p.paint()
			p.jumpToMatch()
			p.s.flashInfo(p.searchStatus())
			return nil
		case "esc":
			p.searching = false
			p.input.Blur()
			p.layout()
			return nil
		}
		var cmd tea.Cmd
		p.input, cmd = p.input.Update(msg)
		return cmd
	}
	if p.toc {
		return p.updateTOC(k)
	}
	switch {
	case key.Matches(k, keys.Search):
		p.searching = true
		p.input.SetValue(p.query)
		p.input.CursorEnd()
		p.layout()
		return p.input.Focus()
	case key.Matches(k, keys.NextMatch) && p.query != "":
		if len(p.matches) > 0 {
			p.match = (p.match + 1) % len(p.matches)
			p.jumpToMatch()
		}
		p.s.flashInfo(p.searchStatus())
	case key.Matches(k, keys.PrevMatch) && p.query != "":
		if len(p.matches) > 0 {
			p.match = (p.match + len(p.matches) - 1) % len(p.matches)
			p.jumpToMatch()
		}
		p.s.flashInfo(p.searchStatus())
	case k.String() == "esc" && p.query != "":
		p.query, p.matches = "", nil
		p.paint()
	case key.Matches(k, keys.Back):
		return msgCmd(backMsg{})
	case key.Matches(k, keys.NextPage):
		if p.cur == len(p.pages)-1 {
			p.s.flashInfo("This is the last page of the module's lessons.")
			return nil
		}
		return p.turn(p.cur + 1)
	case key.Matches(k, keys.PrevPage):
		return p.turn(p.cur - 1)
	case key.Matches(k, keys.Contents):
		p.toc = true
		p.tocCursor = p.cur
	case key.Matches(k, keys.Top):
		p.vp.GotoTop()
	case key.Matches(k, keys.Bottom):
		p.vp.GotoBottom()
	default:
		var cmd tea.Cmd
		p.vp, cmd = p.vp.Update(msg)
		return cmd
	}
	return nil
}

func (p *pagerView) updateTOC(k tea.KeyMsg) tea.Cmd {
	switch {
	case key.Matches(k, keys.Up):
		p.tocCursor = max(0, p.tocCursor-1)
	case key.Matches(k, keys.Down):
		p.tocCursor = min(len(p.pages)-1, p.tocCursor+1)
	case key.Matches(k, keys.Open):
		p.toc = false
		return p.turn(p.tocCursor)
	case key.Matches(k, keys.Back), key.Matches(k, keys.Contents):
		p.toc = false
	}
	return nil
}

func (p *pagerView) keyMap() keyMap {
	if p.toc {
		return keyMap{
			short: []key.Binding{keys.Up, keys.Down, withHelp(keys.Open, "enter", "go to page"), withHelp(keys.Back, "esc", "close")},
			full:  [][]key.Binding{{keys.Up, keys.Down}, {withHelp(keys.Open, "enter", "go to page"), withHelp(keys.Back, "esc", "close")}},
		}
	}
	if p.searching {
		return keyMap{short: []key.Binding{withHelp(keys.Open, "enter", "search"), withHelp(keys.Back, "esc", "cancel")}}
	}
	return keyMap{
		short: []key.Binding{keys.NextPage, keys.PrevPage, keys.Contents, keys.Search, keys.Back, keys.Help},
		full: [][]key.Binding{
			{keys.Up, keys.Down, keys.PageDown, keys.PageUp, keys.Top, keys.Bottom},
			{keys.NextPage, keys.PrevPage, keys.Contents},
			{keys.Search, keys.NextMatch},
			{keys.Back, keys.Interrupt},
		},
	}
}

func withHelp(b key.Binding, k, desc string) key.Binding {
	b.SetHelp(k, desc)
	return b
}

// heading is the line above the page: lesson, page number and section.
func (p *pagerView) heading() string {
	st := p.s.st
	if len(p.pages) == 0 {
		return ""
	}
	r := p.page()
	left := st.bold.Render(r.lesson.Title)
	if t := r.lesson.Pages[r.page].Title; isSection(r.lesson.Pages[r.page]) && t != "" {
		left += st.dim.Render(" › " + t)
	}
	right := fmt.Sprintf("page %d/%d", p.cur+1, len(p.pages))
	if len(p.matches) > 0 {
		right = fmt.Sprintf("%d matches · ", len(p.matches)) + right
	}
	return rightAlign(left, st.dim.Render(right), p.w)
}

func (p *pagerView) View() string {
	if p.toc {
		return p.tocView()
	}
	parts := []string{p.heading(), p.vp.View()}
	if p.searching {
		parts = append(parts, p.input.View())
	}
	return frame(strings.Join(parts, "\n"), p.w, p.h)
}

func (p *pagerView) tocView() string {
	st := p.s.st
	title := "Contents"
	if p.mod != nil {
		title = "Contents of " + p.mod.Title
	}
	lines := []string{st.bold.Render(title), ""}
	type entry struct {
		text string
		idx  int
	}
	var entries []entry
	var last *course.Lesson
	for i, r := range p.pages {
		if r.lesson != last {
			last = r.lesson
			entries = append(entries, entry{st.heading.Render(r.lesson.Title), -1})
		}
		t := r.lesson.Pages[r.page].Title
		if !isSection(r.lesson.Pages[r.page]) && len(r.lesson.Pages) > 1 {
			t = "(introduction)"
		}
		entries = append(entries, entry{fmt.Sprintf("%2d. %s", i+1, t), i})
	}
	// Keep the cursor in view.
	avail := max(1, p.h-len(lines))
	first := 0
	for i, e := range entries {
		if e.idx == p.tocCursor && i >= first+avail {
			first = i - avail + 1
		}
	}
	for _, e := range entries[first:] {
		switch {
		case e.idx < 0:
			lines = append(lines, "  "+e.text)
		case e.idx == p.tocCursor:
			lines = append(lines, st.sel.Render("  ▸ "+e.text))
		case e.idx == p.cur:
			lines = append(lines, "    "+e.text+st.dim.Render("  (reading)"))
		default:
			lines = append(lines, "    "+e.text)
		}
	}
	return frame(strings.Join(lines, "\n"), p.w, p.h)
}
