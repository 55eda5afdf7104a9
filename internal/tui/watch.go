package tui

import (
	"path/filepath"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/fsnotify/fsnotify"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// watcher reports saves of an exercise's learner files. It watches the exercise's folder, not
// the files, because editors often save by writing a new file and renaming it over the old.
type watcher struct {
	e      *course.Exercise
	fw     *fsnotify.Watcher
	files  map[string]bool // base names of the learner files
	news   chan struct{}   // one slot: a file changed
	closed chan struct{}
	once   sync.Once
	seq    int // debounce generation, owned by the UI
}

// fileChangedMsg says a learner file changed; watchFireMsg that the changes settled.
type fileChangedMsg struct{ w *watcher }
type watchFireMsg struct {
	w   *watcher
	seq int
}

func startWatch(dir string, e *course.Exercise) (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := fw.Add(dir); err != nil {
		fw.Close()
		return nil, err
	}
	w := &watcher{e: e, fw: fw, files: map[string]bool{}, news: make(chan struct{}, 1), closed: make(chan struct{})}
	for _, f := range e.Files {
		w.files[filepath.Base(f)] = true
	}
	go w.loop()
	return w, nil
}

func (w *watcher) loop() {
	for {
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if !w.files[filepath.Base(ev.Name)] || !ev.Has(fsnotify.Write|fsnotify.Create|fsnotify.Rename) {
				continue
			}
			select {
			case w.news <- struct{}{}:
			default:
			}
		case _, ok := <-w.fw.Errors:
			if !ok {
				return
			}
		case <-w.closed:
			return
		}
	}
}

// waitCmd waits for the next change; it returns nothing once the watcher is stopped.
func (w *watcher) waitCmd() tea.Cmd {
	return func() tea.Msg {
		select {
		case <-w.news:
			return fileChangedMsg{w}
		case <-w.closed:
			return nil
		}
	}
}

func (w *watcher) stop() {
	w.once.Do(func() {
		close(w.closed)
		w.fw.Close()
	})
}
