// Package workspace manages a learner's workspace: the folder where the exercises' files are
// copied for editing, the backups made before a reset, and the progress record.
//
// Layout:
//
//	<root>/.mgpu-learn/workspace.json   marker (course title, creation time)
//	<root>/.mgpu-learn/progress.json    progress (see Progress)
//	<root>/.mgpu-learn/lock             flock'd while progress is updated
//	<root>/.mgpu-learn/backups/...      learner files saved by Reset
//	<root>/<module folder>/<exercise>/  the learner's files and TASK.md
package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// StateDir is the name of the folder that marks a workspace and holds its state.
const StateDir = ".mgpu-learn"

// TaskFile is the name the task statement gets in each exercise folder.
const TaskFile = "TASK.md"

// ErrNoWorkspace is returned (wrapped) by Find and Open when there is no workspace.
var ErrNoWorkspace = errors.New("no mgpu-learn workspace")

// Workspace is an opened workspace.
type Workspace struct {
	// Root is the workspace folder, absolute.
	Root string

	mu       sync.Mutex
	warnings []string
}

// marker is the content of .mgpu-learn/workspace.json.
type marker struct {
	Schema    int       `json:"schema"`
	Course    string    `json:"course"`
	CreatedAt time.Time `json:"created_at"`
}

// Init makes dir a workspace for course c, or brings an existing one up to date: it creates
// the state folder and, for every exercise, <moddir>/<name>/<file> from the starter and
// TASK.md from the task. It never overwrites a file: one that exists is left alone and listed in
// skipped. created and skipped are paths relative to dir, with slashes.
func Init(dir string, c *course.Course) (created, skipped []string, err error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	state := filepath.Join(root, StateDir)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, nil, err
	}
	mk, err := json.MarshalIndent(marker{Schema: ProgressSchema, Course: c.Title, CreatedAt: time.Now().UTC()}, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	if _, err := writeNew(filepath.Join(state, "workspace.json"), append(mk, '\n')); err != nil {
		return nil, nil, err
	}
	w := &Workspace{Root: root}
	for _, ex := range c.Exercises() {
		files := map[string]string{TaskFile: ex.TaskPath()}
		for _, f := range ex.Files {
			files[f] = ex.StarterPath(f)
		}
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			data, err := fs.ReadFile(c.FS, files[name])
			if err != nil {
				return created, skipped, fmt.Errorf("%s: %w", ex.ID, err)
			}
			dst := w.FilePath(ex, name)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return created, skipped, err
			}
			rel := path.Join(ex.Module.Dir, ex.Name(), name)
			made, err := writeNew(dst, data)
			if err != nil {
				return created, skipped, err
			}
			if made {
				created = append(created, rel)
			} else {
				skipped = append(skipped, rel)
			}
		}
	}
	return created, skipped, nil
}

// writeNew creates name with data unless it exists; it reports whether it wrote. The file is
// created with O_EXCL, so a file that appears meanwhile is not clobbered either.
func writeNew(name string, data []byte) (bool, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(name)
		return false, err
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return false, err
	}
	return true, nil
}

// Open opens the workspace whose root is dir. The error wraps ErrNoWorkspace when dir has no
// state folder.
func Open(dir string) (*Workspace, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(filepath.Join(root, StateDir))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
		return nil, fmt.Errorf("%w in %s (run \"mgpu-learn init\" there to make one)", ErrNoWorkspace, root)
	}
	if err != nil {
		return nil, err
	}
	return &Workspace{Root: root}, nil
}

// Find opens the workspace that holds start: start itself or the nearest parent folder with a
// state folder. The error wraps ErrNoWorkspace when there is none.
func Find(start string) (*Workspace, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return nil, err
	}
	from := dir
	for {
		fi, err := os.Stat(filepath.Join(dir, StateDir))
		if err == nil && fi.IsDir() {
			return &Workspace{Root: dir}, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return nil, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("%w in %s or any folder above it (run \"mgpu-learn init\" to make one)", ErrNoWorkspace, from)
		}
		dir = parent
	}
}

// StatePath is the path of a file in the state folder.
func (w *Workspace) StatePath(name string) string { return filepath.Join(w.Root, StateDir, name) }

// ExerciseDir is the folder of the learner's copy of ex: <root>/<module folder>/<exercise>.
func (w *Workspace) ExerciseDir(ex *course.Exercise) string {
	return filepath.Join(w.Root, ex.Module.Dir, ex.Name())
}

// FilePath is the path of the learner's copy of file name of ex.
func (w *Workspace) FilePath(ex *course.Exercise, name string) string {
	return filepath.Join(w.ExerciseDir(ex), filepath.FromSlash(name))
}

// TaskPath is the path of ex's TASK.md.
func (w *Workspace) TaskPath(ex *course.Exercise) string { return w.FilePath(ex, TaskFile) }

// Files maps each learner file name of ex to its path in the workspace.
func (w *Workspace) Files(ex *course.Exercise) map[string]string {
	m := make(map[string]string, len(ex.Files))
	for _, f := range ex.Files {
		m[f] = w.FilePath(ex, f)
	}
	return m
}

// warn keeps a warning for TakeWarnings.
func (w *Workspace) warn(msg string) {
	w.mu.Lock()
	w.warnings = append(w.warnings, msg)
	w.mu.Unlock()
}

// TakeWarnings returns, and forgets, the warnings of UpdateProgress calls: a corrupt or newer
// progress file that had to be moved aside. LoadProgress returns its warnings directly.
func (w *Workspace) TakeWarnings() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// exerciseKey is an exercise id made into one folder name: "module0/peer-copy" becomes
// "module0-peer-copy".
func exerciseKey(id string) string { return strings.ReplaceAll(id, "/", "-") }
