package build

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// keyVersion changes whenever the meaning of a key changes (new flags, new layout), so old
// entries simply stop matching.
const keyVersion = "mgpu-learn build cache v2" // v2: full RELRO, run paths, RDC for NVSHMEM

// maxTreeFiles bounds the files hashed under one include directory. A directory with more
// gets a key of its own for every build: always correct, never cached.
const maxTreeFiles = 5000

var errTooManyFiles = errors.New("too many files to hash")

// hasher builds an action key from named, length-prefixed fields, so that no two different
// inputs can produce the same byte stream.
type hasher struct{ h hash.Hash }

func newHasher(what string) *hasher {
	h := &hasher{sha256.New()}
	h.add("version", keyVersion)
	h.add("action", what)
	return h
}

func (h *hasher) add(name string, vals ...string) {
	var n [8]byte
	write := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.h.Write(n[:])
		h.h.Write([]byte(s))
	}
	write(name)
	binary.LittleEndian.PutUint64(n[:], uint64(len(vals)))
	h.h.Write(n[:])
	for _, v := range vals {
		write(v)
	}
}

func (h *hasher) sum() key {
	var k key
	copy(k[:], h.h.Sum(nil))
	return k
}

func fileDigest(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", sha256.Sum256(data)), nil
}

// statDigest identifies a file that is too big or too many to read (a compiler, a system
// library) by its size and modification time.
func statDigest(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return path + " missing"
	}
	return fmt.Sprintf("%s %d %d", path, st.Size(), st.ModTime().UnixNano())
}

var headerExts = map[string]bool{
	".h": true, ".hh": true, ".hpp": true, ".hxx": true, ".cuh": true, ".inc": true,
	".inl": true, ".ipp": true, ".tcc": true, ".def": true,
}

var codeExts = map[string]bool{".c": true, ".cc": true, ".cpp": true, ".cxx": true, ".cu": true}

// treeDigest hashes, path-independently, every file under dir that a compile may include:
// headers, and code files that are not compiled on their own (a driver may #include one).
// Files of the build's own sources are left out so that editing one source does not change
// the key of the others.
func treeDigest(dir string, sources map[string]bool) (string, error) {
	h := sha256.New()
	count := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(name, ".") || name == "__pycache__" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		ext := strings.ToLower(filepath.Ext(name))
		if !headerExts[ext] && !(codeExts[ext] && !sources[path]) {
			return nil
		}
		if count++; count > maxTreeFiles {
			return errTooManyFiles
		}
		sum, err := fileDigest(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "%q %s\n", filepath.ToSlash(rel), sum)
		return nil
	})
	if errors.Is(err, errTooManyFiles) {
		var nonce [16]byte
		_, _ = rand.Read(nonce[:])
		return fmt.Sprintf("uncacheable %x", nonce), nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// dirHeaders fingerprints the headers directly in a library's include directory (by size
// and time: /usr/include is large), so that upgrading the library rebuilds.
func dirHeaders(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return dir + " missing"
	}
	var b strings.Builder
	b.WriteString(dir)
	for _, e := range ents {
		if e.IsDir() || !headerExts[strings.ToLower(filepath.Ext(e.Name()))] {
			continue
		}
		if info, err := e.Info(); err == nil {
			fmt.Fprintf(&b, "\n%s %d %d", e.Name(), info.Size(), info.ModTime().UnixNano())
		}
	}
	return b.String()
}

// libFiles fingerprints what the link arguments name: files given by path, and -lname /
// -l:file resolved in the library directories.
func libFiles(libDirs, args []string) []string {
	var out []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "-l:"):
			for _, d := range libDirs {
				out = append(out, statDigest(filepath.Join(d, a[3:])))
			}
		case strings.HasPrefix(a, "-l") && len(a) > 2:
			for _, d := range libDirs {
				out = append(out, statDigest(filepath.Join(d, "lib"+a[2:]+".so")),
					statDigest(filepath.Join(d, "lib"+a[2:]+".a")))
			}
		case !strings.HasPrefix(a, "-") && filepath.IsAbs(a):
			out = append(out, statDigest(a))
		}
	}
	slices.Sort(out)
	return out
}
