package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// BackupDir is the folder under the state folder where Reset saves learner files.
const BackupDir = "backups"

// Reset puts ex's starter files back. Each learner file that differs from its starter is first
// copied to .mgpu-learn/backups/<exercise id with dashes>/<UTC time>/<file> and synced to disk;
// only when every backup is safe are the files replaced, each atomically. A missing learner file
// or TASK.md is recreated. It returns the paths of the backups made (none when nothing had
// changed).
func (w *Workspace) Reset(ex *course.Exercise) (backups []string, err error) {
	type change struct {
		name    string
		dst     string
		starter []byte
		perm    fs.FileMode
	}
	var changes []change
	var stampDir string
	for _, name := range ex.Files {
		starter, err := fs.ReadFile(ex.FS(), ex.StarterPath(name))
		if err != nil {
			return backups, fmt.Errorf("%s: reading the starter: %w", ex.ID, err)
		}
		dst := w.FilePath(ex, name)
		cur, err := os.ReadFile(dst)
		perm := fs.FileMode(0o644)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			changes = append(changes, change{name, dst, starter, perm})
			continue
		case err != nil:
			return backups, err
		}
		if fi, err := os.Stat(dst); err == nil {
			perm = fi.Mode().Perm()
		}
		if bytes.Equal(cur, starter) {
			continue
		}
		if stampDir == "" {
			if stampDir, err = w.newBackupDir(ex); err != nil {
				return backups, err
			}
		}
		bk := filepath.Join(stampDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(bk), 0o755); err != nil {
			return backups, err
		}
		if err := writeDurable(bk, cur, perm); err != nil {
			return backups, fmt.Errorf("backing up %s: %w", dst, err)
		}
		backups = append(backups, bk)
		changes = append(changes, change{name, dst, starter, perm})
	}
	for _, ch := range changes {
		if err := os.MkdirAll(filepath.Dir(ch.dst), 0o755); err != nil {
			return backups, err
		}
		if err := writeAtomic(ch.dst, ch.starter, ch.perm); err != nil {
			return backups, fmt.Errorf("restoring %s (its backup is safe): %w", ch.dst, err)
		}
	}
	if _, err := os.Stat(w.TaskPath(ex)); errors.Is(err, fs.ErrNotExist) {
		task, err := fs.ReadFile(ex.FS(), ex.TaskPath())
		if err != nil {
			return backups, err
		}
		if _, err := writeNew(w.TaskPath(ex), task); err != nil {
			return backups, err
		}
	}
	return backups, nil
}

// newBackupDir creates a fresh, uniquely named backup folder for ex.
func (w *Workspace) newBackupDir(ex *course.Exercise) (string, error) {
	parent := filepath.Join(w.Root, StateDir, BackupDir, exerciseKey(ex.ID))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	for i := 1; ; i++ {
		dir := filepath.Join(parent, stamp)
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", dir, i)
		}
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			syncDir(parent)
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
}
