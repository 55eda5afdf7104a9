package course

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// NewFS joins file systems under fixed folders: lessons under "lessons/", exercises under
// "exercises/", and each entry of the optional extra maps under its key (a slash path such as
// "csrc" or "share/data"). Each part must be rooted at its own folder (an embed.FS declared in
// that folder, fs.Sub of one, os.DirFS, fstest.MapFS). The result implements fs.ReadDirFS,
// fs.ReadFileFS and fs.StatFS, so fs.WalkDir and Load work on it. NewFS panics on a nil part or
// on mount points that are invalid or nest in each other: those are programming errors.
func NewFS(lessons, exercises fs.FS, extra ...map[string]fs.FS) fs.FS {
	u := &unionFS{mounts: map[string]fs.FS{}, dirs: map[string][]string{}}
	u.mount("lessons", lessons)
	u.mount("exercises", exercises)
	var keys []string
	parts := map[string]fs.FS{}
	for _, m := range extra {
		for k, f := range m {
			keys = append(keys, k)
			parts[k] = f
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		u.mount(k, parts[k])
	}
	for dir := range u.dirs {
		sort.Strings(u.dirs[dir])
	}
	return u
}

// unionFS serves mounted file systems and the synthetic folders above their mount points.
type unionFS struct {
	mounts map[string]fs.FS
	// dirs are the synthetic folders ("." and the parents of mount points) with their children.
	dirs map[string][]string
}

func (u *unionFS) mount(at string, fsys fs.FS) {
	if fsys == nil {
		panic(fmt.Sprintf("course.NewFS: nil file system for %q", at))
	}
	if !fs.ValidPath(at) || at == "." {
		panic(fmt.Sprintf("course.NewFS: invalid mount point %q", at))
	}
	for m := range u.mounts {
		if m == at || strings.HasPrefix(at, m+"/") || strings.HasPrefix(m, at+"/") {
			panic(fmt.Sprintf("course.NewFS: mount points %q and %q overlap", m, at))
		}
	}
	if _, ok := u.dirs[at]; ok {
		panic(fmt.Sprintf("course.NewFS: mount point %q is above another mount point", at))
	}
	u.mounts[at] = fsys
	for child := at; ; {
		parent := path.Dir(child)
		kids, seen := u.dirs[parent]
		if !contains(kids, path.Base(child)) {
			u.dirs[parent] = append(kids, path.Base(child))
		}
		if parent == "." || seen {
			break
		}
		child = parent
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// resolve finds the mounted file system serving name and the name inside it.
func (u *unionFS) resolve(op, name string) (fs.FS, string, error) {
	if !fs.ValidPath(name) {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	for at := name; at != "."; at = path.Dir(at) {
		if m, ok := u.mounts[at]; ok {
			rest := "."
			if at != name {
				rest = name[len(at)+1:]
			}
			return m, rest, nil
		}
	}
	return nil, "", nil
}

// fixErr rewrites the path of an error from a mounted file system to the union's name.
func fixErr(err error, name string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
	}
	return err
}

func (u *unionFS) Open(name string) (fs.File, error) {
	m, rest, err := u.resolve("open", name)
	if err != nil {
		return nil, err
	}
	if m == nil {
		if kids, ok := u.dirs[name]; ok {
			return &synthDir{u: u, name: name, kids: kids}, nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := m.Open(rest)
	if err != nil {
		return nil, fixErr(err, name)
	}
	if rest == "." {
		return &renamedFile{File: f, name: path.Base(name)}, nil
	}
	return f, nil
}

func (u *unionFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m, rest, err := u.resolve("readdir", name)
	if err != nil {
		return nil, err
	}
	if m == nil {
		kids, ok := u.dirs[name]
		if !ok {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
		}
		return u.synthEntries(name, kids), nil
	}
	entries, err := fs.ReadDir(m, rest)
	return entries, fixErr(err, name)
}

func (u *unionFS) ReadFile(name string) ([]byte, error) {
	m, rest, err := u.resolve("readfile", name)
	if err != nil {
		return nil, err
	}
	if m == nil {
		if _, ok := u.dirs[name]; ok {
			return nil, &fs.PathError{Op: "readfile", Path: name, Err: errors.New("is a directory")}
		}
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	data, err := fs.ReadFile(m, rest)
	return data, fixErr(err, name)
}

func (u *unionFS) Stat(name string) (fs.FileInfo, error) {
	m, rest, err := u.resolve("stat", name)
	if err != nil {
		return nil, err
	}
	if m == nil {
		if _, ok := u.dirs[name]; ok {
			return synthInfo(path.Base(name)), nil
		}
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	fi, err := fs.Stat(m, rest)
	if err != nil {
		return nil, fixErr(err, name)
	}
	if rest == "." {
		return renamedInfo{FileInfo: fi, name: path.Base(name)}, nil
	}
	return fi, nil
}

func (u *unionFS) synthEntries(dir string, kids []string) []fs.DirEntry {
	out := make([]fs.DirEntry, 0, len(kids))
	for _, k := range kids {
		full := path.Join(dir, k)
		if m, ok := u.mounts[full]; ok {
			if fi, err := fs.Stat(m, "."); err == nil {
				out = append(out, fs.FileInfoToDirEntry(renamedInfo{FileInfo: fi, name: k}))
				continue
			}
		}
		out = append(out, fs.FileInfoToDirEntry(synthInfo(k)))
	}
	return out
}

// synthInfo describes a synthetic folder.
type synthInfo string

func (s synthInfo) Name() string     { return string(s) }
func (synthInfo) Size() int64        { return 0 }
func (synthInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (synthInfo) ModTime() time.Time { return time.Time{} }
func (synthInfo) IsDir() bool        { return true }
func (synthInfo) Sys() any           { return nil }

// renamedInfo gives a mount point's root the name it has in the union.
type renamedInfo struct {
	fs.FileInfo
	name string
}

func (r renamedInfo) Name() string { return r.name }

type renamedFile struct {
	fs.File
	name string
}

func (r *renamedFile) Stat() (fs.FileInfo, error) {
	fi, err := r.File.Stat()
	if err != nil {
		return nil, err
	}
	return renamedInfo{FileInfo: fi, name: r.name}, nil
}

// ReadDir passes through to the mounted root when it can list itself.
func (r *renamedFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if d, ok := r.File.(fs.ReadDirFile); ok {
		return d.ReadDir(n)
	}
	return nil, &fs.PathError{Op: "readdir", Path: r.name, Err: errors.New("not a directory")}
}

// synthDir is an open synthetic folder.
type synthDir struct {
	u    *unionFS
	name string
	kids []string
	off  int
}

func (d *synthDir) Stat() (fs.FileInfo, error) { return synthInfo(path.Base(d.name)), nil }
func (d *synthDir) Close() error               { return nil }
func (d *synthDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}

func (d *synthDir) ReadDir(n int) ([]fs.DirEntry, error) {
	all := d.u.synthEntries(d.name, d.kids)
	rest := all[d.off:]
	if n <= 0 {
		d.off = len(all)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.off += n
	return rest[:n], nil
}
