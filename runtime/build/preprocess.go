package build

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A learner's source is also kept preprocessed, as the compiler saw it, for the policy stage:
// a call spelled through a macro, or made from device code (which no host symbol table lists),
// is there in plain words. For a .cu file nvcc's own intermediate files give both passes — the
// device pass with __CUDA_ARCH__ defined, one per architecture, and the host pass — from the
// compile itself; any other source is preprocessed once more with -E and the same options.
//
// The stored form keeps only the lines the learner controls (learnerLines), one per line:
//
//	<file>:<line>\t<text>        file: a base name in the learner's directory, else a path
//	!line <file>:<line> <path>   a #line directive at file:line claimed to be path
//
// so the checker can name the file and line, and the headers' thousands of lines stay out.

// keepArgs are the extra compile options that leave the preprocessed passes in dir, or nil
// where the compile does not produce them (then preprocessOnly is used).
func (p *plan) keepArgs(src, dir string) []string {
	if p.kind == "cuda" && strings.EqualFold(filepath.Ext(src), ".cu") {
		return []string{"-keep", "-keep-dir", dir}
	}
	return nil
}

// preprocessArgs is the command line that preprocesses src into out.
func (p *plan) preprocessArgs(src, out string) []string {
	args := []string{"-E"}
	args = append(args, p.language(src)...)
	args = append(args, p.compile...)
	return append(args, src, "-o", out)
}

// ppKey is the cache key of a learner object's preprocessed lines.
func ppKey(k key) key { return sideKey(k, "preprocessed lines v1") }

// ptxKey is the cache key of a learner object's PTX.
func ptxKey(k key) key { return sideKey(k, "ptx v1") }

// sideKey is the cache key of something kept beside the object of key k.
func sideKey(k key, what string) key {
	h := sha256.New()
	h.Write(k[:])
	h.Write([]byte(what))
	var out key
	copy(out[:], h.Sum(nil))
	return out
}

// learnerLines reads preprocessor outputs of main (an absolute path) and returns the lines
// the learner controls: those of files in main's directory (the learner's own), and those of
// any file outside the trusted directories (the compiler's, the libraries', the course's), so
// that a header the learner wrote elsewhere and included by its path counts as theirs too.
// A marker that moves to another file without entering or leaving one is a #line directive:
// the lines after it stay the learner's, and a "!line" entry records the claim.
func learnerLines(files []string, main string, trusted []string) ([]byte, error) {
	dir := filepath.Dir(main)
	var out bytes.Buffer
	seen := map[string]bool{}
	emit := func(s string) {
		if !seen[s] {
			seen[s] = true
			out.WriteString(s)
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		cur, show, line := "", "", 0 // show: how cur is stored, "" when its lines are not kept
		for sc.Scan() {
			text := sc.Text()
			if file, n, flags, ok := lineMarker(text); ok {
				file = filepath.Clean(file)
				if file == "." { // a marker without a file keeps the file
					file = cur
				}
				switch {
				case file == cur || strings.HasPrefix(file, "<"):
				case flags == "" && cur != "" && !strings.HasPrefix(cur, "<") && file != main:
					// #line: the file it claims gets no trust.
					emit(fmt.Sprintf("!line %s:%d %s\n", orBase(show, cur, dir), line, file))
					if show == "" {
						show = orBase("", file, dir)
					}
				default:
					show = ""
					if learnerFile(file, dir, trusted) {
						show = orBase("", file, dir)
					}
				}
				cur, line = file, n
				if strings.HasPrefix(file, "<") {
					show = ""
				}
				continue
			}
			if show != "" && strings.TrimSpace(text) != "" {
				// The same line from several passes is kept once when it reads the same.
				emit(fmt.Sprintf("%s:%d\t%s\n", show, line, text))
			}
			line++
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return out.Bytes(), nil
}

// orBase is show when set, else file's base name for a file in dir, else file.
func orBase(show, file, dir string) string {
	switch {
	case show != "":
		return show
	case filepath.Dir(file) == dir:
		return filepath.Base(file)
	}
	return file
}

// learnerFile says whether a file's lines are the learner's: in the learner's directory, or
// outside every trusted directory.
func learnerFile(file, dir string, trusted []string) bool {
	if filepath.Dir(file) == dir {
		return true
	}
	for _, t := range trusted {
		if t != "" && (file == t || strings.HasPrefix(file, t+string(filepath.Separator))) {
			return false
		}
	}
	return true
}

// lineMarker parses a preprocessor line marker, `# 12 "file" 1 3 4` or `#line 12 "file"`;
// flags are what follows the file name ("" for none).
func lineMarker(s string) (file string, line int, flags string, ok bool) {
	if !strings.HasPrefix(s, "#") {
		return "", 0, "", false
	}
	rest := strings.TrimLeft(s[1:], " \t")
	rest = strings.TrimPrefix(rest, "line")
	rest = strings.TrimLeft(rest, " \t")
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 {
		return "", 0, "", false
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil {
		return "", 0, "", false
	}
	rest = strings.TrimLeft(rest[i:], " \t")
	if !strings.HasPrefix(rest, `"`) {
		return "", n, "", true
	}
	end := strings.IndexByte(rest[1:], '"')
	if end < 0 {
		return "", 0, "", false
	}
	return rest[1 : 1+end], n, strings.TrimSpace(rest[2+end:]), true
}

// trustedDirs are the directories whose headers are not the learner's: every include
// directory of the compile (the course's and the libraries'; not the learner's own), the
// compiler's installation, and the system's.
func (p *plan) trustedDirs(learnerDir string) []string {
	var dirs []string
	for i, a := range p.compile {
		d := ""
		switch {
		case strings.HasPrefix(a, "-I") && len(a) > 2:
			d = a[2:]
		case (a == "-I" || a == "-isystem") && i+1 < len(p.compile):
			d = p.compile[i+1]
		case strings.HasPrefix(a, "-isystem") && len(a) > 8:
			d = a[8:]
		}
		if d != "" {
			if abs, err := filepath.Abs(d); err == nil && abs != learnerDir {
				dirs = append(dirs, abs)
			}
		}
	}
	if c, err := exec.LookPath(p.compiler); err == nil {
		if abs, err := filepath.Abs(c); err == nil {
			dirs = append(dirs, filepath.Dir(filepath.Dir(abs)))
		}
	}
	return append(dirs, "/usr/include", "/usr/lib", "/usr/local/include", "/usr/local/cuda", "/opt/nvidia")
}

// preprocessed produces and stores the learner lines of o, compiled into out with keep as
// nvcc's keep directory (or "" when the compile kept nothing).
func (b *Builder) preprocessed(ctx context.Context, p *plan, o *object, out, keep string) error {
	var files []string
	if keep != "" {
		for _, pat := range []string{"*.ii", "*.i"} {
			m, _ := filepath.Glob(filepath.Join(keep, pat))
			files = append(files, m...)
		}
	}
	if len(files) == 0 {
		i := out + ".i"
		output, failed, err := run(ctx, p.compiler, p.preprocessArgs(o.abs, i))
		if err != nil {
			return fmt.Errorf("build: preprocessing %s: %w", o.src.Show, err)
		}
		if failed {
			return fmt.Errorf("build: preprocessing %s failed although it compiled:\n%s", o.src.Show, output)
		}
		files = []string{i}
	}
	lines, err := learnerLines(files, o.abs, p.trustedDirs(filepath.Dir(o.abs)))
	if err != nil {
		return fmt.Errorf("build: preprocessed %s: %w", o.src.Show, err)
	}
	tmp := out + ".pp"
	if err := os.WriteFile(tmp, lines, 0o644); err != nil {
		return fmt.Errorf("build: cache: %w", err)
	}
	if o.pp, err = b.cache.put(ppKey(o.key), ".pp", tmp, ""); err != nil {
		return fmt.Errorf("build: cache: %w", err)
	}
	return b.keepPTX(o, out, keep)
}

// keepPTX stores the PTX that nvcc left in keep (one file per virtual architecture) as one
// file: what the learner's device code compiled to, which a policy rule can read
// (checker/ordering.go). Nothing is stored when the compile kept no PTX.
func (b *Builder) keepPTX(o *object, out, keep string) error {
	if keep == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(keep, "*.ptx"))
	if len(files) == 0 {
		return nil
	}
	sort.Strings(files)
	var all bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("build: reading the PTX of %s: %w", o.src.Show, err)
		}
		all.Write(data)
		all.WriteByte('\n')
	}
	tmp := out + ".ptx"
	if err := os.WriteFile(tmp, all.Bytes(), 0o644); err != nil {
		return fmt.Errorf("build: cache: %w", err)
	}
	var err error
	if o.ptx, err = b.cache.put(ptxKey(o.key), ".ptx", tmp, ""); err != nil {
		return fmt.Errorf("build: cache: %w", err)
	}
	return nil
}
