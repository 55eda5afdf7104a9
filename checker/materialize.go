package checker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// courseFile is one course-owned file to put on disk for a build or run.
type courseFile struct {
	Name string // file name in the source directory
	Show string // how diagnostics name it: its path in the course or in csrc/
	Role string // driver (driver and support files) or harness
	Data []byte
}

// harnessSources are the harness sources an exercise compiles, by kind and libraries.
func harnessSources(e *course.Exercise) []string {
	switch e.Kind {
	case "cuda":
		// mgpu_fd.c (descriptors between ranks) and mgpu_cudrv.cu (driver entry points, SM
		// limits) link libcuda nowhere, so every cuda program can have them.
		srcs := []string{"mgpu_core.c", "mgpu_chan.c", "mgpu_cuda.cu", "mgpu_fd.c", "mgpu_cudrv.cu"}
		if slices.Contains(e.Build.Libs, "nccl") {
			srcs = append(srcs, "mgpu_nccl.cu")
		}
		if slices.Contains(e.Build.Libs, "mpi") {
			srcs = append(srcs, "mgpu_mpi.c")
		}
		return srcs
	case "c":
		return []string{"mgpu_core.c", "mgpu_chan.c"}
	}
	return nil
}

// courseFiles collects the driver, support files and harness files an exercise needs.
func (k *check) courseFiles() ([]courseFile, error) {
	e := k.e
	var files []courseFile
	add := func(f courseFile) error {
		for _, g := range files {
			if g.Name == f.Name {
				return fmt.Errorf("%s and %s would both be %s in the build directory", g.Show, f.Show, f.Name)
			}
		}
		files = append(files, f)
		return nil
	}
	if e.Driver == "" {
		return nil, fmt.Errorf("%s: the manifest names no driver", path.Join(e.Dir, "exercise.yaml"))
	}
	for _, rel := range append([]string{e.Driver}, e.Support...) {
		data, err := e.ReadFile(rel)
		if err != nil {
			return nil, fmt.Errorf("course file %s: %w", path.Join(e.Dir, rel), err)
		}
		if err := add(courseFile{Name: path.Base(rel), Show: path.Join(e.Dir, rel), Role: "driver", Data: data}); err != nil {
			return nil, err
		}
	}
	if e.Kind == "python" {
		for _, n := range []string{"mgpu_harness.py", "mgpu_policy.py"} {
			data, err := fs.ReadFile(k.c.Harness, "python/"+n)
			if err != nil {
				return nil, fmt.Errorf("harness file csrc/python/%s: %w", n, err)
			}
			if err := add(courseFile{Name: n, Show: "csrc/python/" + n, Role: "harness", Data: data}); err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	// Every header of the harness (sources include each other's headers), then its sources.
	ents, err := fs.ReadDir(k.c.Harness, ".")
	if err != nil {
		return nil, fmt.Errorf("harness files: %w", err)
	}
	for _, ent := range ents {
		n := ent.Name()
		if ent.IsDir() || !(strings.HasSuffix(n, ".h") || strings.HasSuffix(n, ".cuh")) {
			continue
		}
		data, err := fs.ReadFile(k.c.Harness, n)
		if err != nil {
			return nil, fmt.Errorf("harness file csrc/%s: %w", n, err)
		}
		if err := add(courseFile{Name: n, Show: "csrc/" + n, Role: "harness", Data: data}); err != nil {
			return nil, err
		}
	}
	for _, n := range harnessSources(e) {
		data, err := fs.ReadFile(k.c.Harness, n)
		if err != nil {
			return nil, fmt.Errorf("harness file csrc/%s: %w", n, err)
		}
		if err := add(courseFile{Name: n, Show: "csrc/" + n, Role: "harness", Data: data}); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// materialize writes files into WorkDir/src/<hash of names and contents>/, reusing a directory
// that is already there (same hash, same bytes). It returns the directory.
func (k *check) materialize(files []courseFile) (string, error) {
	h := sha256.New()
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b courseFile) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range sorted {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Name, len(f.Data))
		h.Write(f.Data)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:20]
	root := filepath.Join(k.c.WorkDir, "src")
	dir := filepath.Join(root, sum)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		if sameFiles(dir, sorted) {
			return dir, nil
		}
		// Changed since it was written (a program of an earlier check may write here where
		// it runs unconfined): the course's own bytes again, from scratch.
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, ".tmp-"+sum+"-")
	if err != nil {
		return "", err
	}
	for _, f := range sorted {
		if err := os.WriteFile(filepath.Join(tmp, f.Name), f.Data, 0o644); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		// Another check materialized the same sources meanwhile.
		if _, serr := os.Stat(filepath.Join(dir, ".complete")); serr == nil {
			return dir, nil
		}
		// A leftover without its marker: replace it.
		os.RemoveAll(dir)
		return k.materialize(files)
	}
	return dir, nil
}

// sameFiles says whether dir holds exactly files (and the .complete marker), byte for byte.
// The sources are small: reading them back costs far less than the build or run they feed.
func sameFiles(dir string, files []courseFile) bool {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != len(files)+1 {
		return false
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil || !bytes.Equal(got, f.Data) {
			return false
		}
	}
	return true
}

// showPath is how the learner sees one of their files: relative to the workspace (Target.Root)
// or the current directory when it lies below it.
func (k *check) showPath(p string) string {
	root := k.t.Root
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return p
		}
		root = wd
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	rootAbs, err := filepath.Abs(root)
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(rootAbs, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p
	}
	return filepath.ToSlash(rel)
}
