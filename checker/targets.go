package checker

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// SolutionTarget writes the course's reference solution files into dir and returns a target
// that checks them.
func SolutionTarget(e *course.Exercise, dir string) (Target, error) {
	files := map[string]string{}
	for _, name := range e.Files {
		p, err := writeCourseFile(e, e.SolutionPath(name), dir, name)
		if err != nil {
			return Target{}, err
		}
		files[name] = p
	}
	return Target{Exercise: e, Files: files, Label: "solution", Root: dir}, nil
}

// VariantTarget writes a variant's files into dir (the solution's for files the variant does
// not hold) and returns a target that checks them.
func VariantTarget(e *course.Exercise, variant, dir string) (Target, error) {
	if e.Variant(variant) == nil {
		var names []string
		for _, v := range e.Variants {
			names = append(names, v.Name)
		}
		return Target{}, fmt.Errorf("%s has no variant %q (it has %v)", e.ID, variant, names)
	}
	files := map[string]string{}
	for _, name := range e.Files {
		src := e.SolutionPath(name)
		if e.HasVariantFile(variant, name) {
			src = e.VariantPath(variant, name)
		}
		p, err := writeCourseFile(e, src, dir, name)
		if err != nil {
			return Target{}, err
		}
		files[name] = p
	}
	return Target{Exercise: e, Files: files, Label: "variant:" + variant, Root: dir}, nil
}

// StarterTarget writes the starter files into dir and returns a target that checks them
// (course lint: every starter must fail as its manifest says).
func StarterTarget(e *course.Exercise, dir string) (Target, error) {
	files := map[string]string{}
	for _, name := range e.Files {
		p, err := writeCourseFile(e, e.StarterPath(name), dir, name)
		if err != nil {
			return Target{}, err
		}
		files[name] = p
	}
	return Target{Exercise: e, Files: files, Label: "starter", Root: dir}, nil
}

func writeCourseFile(e *course.Exercise, fsPath, dir, name string) (string, error) {
	data, err := readFS(e, fsPath)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fsPath, err)
	}
	dst := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return "", err
	}
	return dst, nil
}

func readFS(e *course.Exercise, fsPath string) ([]byte, error) {
	return fs.ReadFile(e.FS(), fsPath)
}
