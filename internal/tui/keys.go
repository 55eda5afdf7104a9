package tui

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/viewport"
)

// keys are every binding of the UI; each screen shows the ones it uses.
var keys = struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Open, Back, Quit, Help, Interrupt       key.Binding
	NextPage, PrevPage, Contents, Search    key.Binding
	NextMatch, PrevMatch                    key.Binding
	Edit, Check, Hint, Reset, Solution      key.Binding
	Watch, Lesson, Cancel, Yes, No          key.Binding
	Submit, Skip, Result                    key.Binding
}{
	Up:        key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
	Down:      key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
	PageUp:    key.NewBinding(key.WithKeys("pgup", "b", "ctrl+u"), key.WithHelp("pgup/b", "page up")),
	PageDown:  key.NewBinding(key.WithKeys("pgdown", " ", "f", "ctrl+d"), key.WithHelp("pgdn/space", "page down")),
	Top:       key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g/home", "top")),
	Bottom:    key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G/end", "bottom")),
	Open:      key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
	Back:      key.NewBinding(key.WithKeys("esc", "q"), key.WithHelp("esc", "back")),
	Quit:      key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
	Help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "more keys")),
	Interrupt: key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
	NextPage:  key.NewBinding(key.WithKeys("right", "l", "]"), key.WithHelp("→/l", "next page")),
	PrevPage:  key.NewBinding(key.WithKeys("left", "h", "["), key.WithHelp("←/h", "previous page")),
	Contents:  key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "contents")),
	Search:    key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "search")),
	NextMatch: key.NewBinding(key.WithKeys("n"), key.WithHelp("n/N", "next/previous match")),
	PrevMatch: key.NewBinding(key.WithKeys("N"), key.WithHelp("N", "previous match")),
	Edit:      key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "edit")),
	Check:     key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "check")),
	Hint:      key.NewBinding(key.WithKeys("h"), key.WithHelp("h", "hint")),
	Reset:     key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reset")),
	Solution:  key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "solution")),
	Watch:     key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "watch")),
	Lesson:    key.NewBinding(key.WithKeys("L"), key.WithHelp("L", "lesson")),
	Cancel:    key.NewBinding(key.WithKeys("esc", "ctrl+c"), key.WithHelp("esc", "cancel the check")),
	Yes:       key.NewBinding(key.WithKeys("y", "Y"), key.WithHelp("y", "yes")),
	No:        key.NewBinding(key.WithKeys("n", "N", "esc"), key.WithHelp("n/esc", "no")),
	Submit:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "save")),
	Skip:      key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "skip")),
	Result:    key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "last result")),
}

// keyMap is one screen's help: a short line and the full columns.
type keyMap struct {
	short []key.Binding
	full  [][]key.Binding
}

func (k keyMap) ShortHelp() []key.Binding  { return k.short }
func (k keyMap) FullHelp() [][]key.Binding { return k.full }

var _ help.KeyMap = keyMap{}

// scrollKeys drives a viewport with the UI's bindings (no horizontal scrolling: left and right
// turn pages in the pager).
func scrollKeys() viewport.KeyMap {
	return viewport.KeyMap{
		PageDown:     keys.PageDown,
		PageUp:       keys.PageUp,
		HalfPageUp:   key.NewBinding(key.WithDisabled()),
		HalfPageDown: key.NewBinding(key.WithDisabled()),
		Up:           keys.Up,
		Down:         keys.Down,
		Left:         key.NewBinding(key.WithDisabled()),
		Right:        key.NewBinding(key.WithDisabled()),
	}
}
