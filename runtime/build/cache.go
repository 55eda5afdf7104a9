package build

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The cache keeps one entry per action key (a sha256, see key.go): the artifact (an object
// file or a linked program) and a small JSON file with the compiler's log. An entry is
// complete when its meta file exists; both are written to a temporary name and renamed
// into place, so concurrent builds never see half a file and may race harmlessly to write
// the same entry. Entries are used in place: the Binary and Objects of a Result point into
// the cache.
//
//	<dir>/<first two hex digits>/<key>-a.o  artifact: an object (compilers go by the suffix)
//	<dir>/<first two hex digits>/<key>-a    artifact: a program
//	<dir>/<first two hex digits>/<key>-m    meta (JSON)
//	<dir>/tmp/                              work directories of running builds
//	<dir>/trim.txt                          unix time of the last trim
//
// Like Go's build cache, an entry's modification time says when it was last used (updated
// at most hourly), and entries unused for trimAge are deleted by a trim that runs at most
// once per trimInterval.

const (
	trimAge      = 14 * 24 * time.Hour
	trimInterval = 24 * time.Hour
	touchAfter   = time.Hour
)

type key [32]byte

func (k key) String() string { return hex.EncodeToString(k[:]) }

// cache is a build cache directory.
type cache struct {
	dir string
	now func() time.Time
}

type meta struct {
	Log string `json:"log"`
}

func (c *cache) paths(k key, ext string) (artifact, metaFile string) {
	h := k.String()
	d := filepath.Join(c.dir, h[:2])
	return filepath.Join(d, h+"-a"+ext), filepath.Join(d, h+"-m")
}

// get returns the artifact path and log of a complete entry; ext is the artifact's suffix.
func (c *cache) get(k key, ext string) (string, string, bool) {
	art, mf := c.paths(k, ext)
	data, err := os.ReadFile(mf)
	if err != nil {
		return "", "", false
	}
	var m meta
	if json.Unmarshal(data, &m) != nil {
		return "", "", false
	}
	st, err := os.Stat(art)
	if err != nil || !st.Mode().IsRegular() {
		return "", "", false
	}
	c.touch(art, st.ModTime())
	c.touch(mf, time.Time{})
	return art, m.Log, true
}

// touch marks a file used now, unless it was marked within the last hour (a cache hit then
// costs no write).
func (c *cache) touch(path string, mtime time.Time) {
	now := c.now()
	if mtime.IsZero() {
		st, err := os.Stat(path)
		if err != nil {
			return
		}
		mtime = st.ModTime()
	}
	if now.Sub(mtime) > touchAfter {
		_ = os.Chtimes(path, now, now)
	}
}

// put moves the file at tmp (on the cache's file system) into the entry for k and records
// its log. It returns the artifact's path in the cache.
func (c *cache) put(k key, ext, tmp, log string) (string, error) {
	art, mf := c.paths(k, ext)
	if err := os.MkdirAll(filepath.Dir(art), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, art); err != nil {
		return "", err
	}
	data, err := json.Marshal(meta{Log: log})
	if err != nil {
		return "", err
	}
	if err := writeAtomic(mf, data); err != nil {
		return "", err
	}
	return art, nil
}

// writeAtomic writes data to a temporary file next to path and renames it into place.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

// workDir makes a directory for one build's outputs before they enter the cache.
func (c *cache) workDir() (string, error) {
	tmp := filepath.Join(c.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(tmp, "build-")
}

// maybeTrim deletes entries unused for trimAge, at most once per trimInterval.
func (c *cache) maybeTrim() error {
	now := c.now()
	stamp := filepath.Join(c.dir, "trim.txt")
	if data, err := os.ReadFile(stamp); err == nil {
		if sec, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
			if last := time.Unix(sec, 0); now.Sub(last) < trimInterval && !last.After(now) {
				return nil
			}
		}
	}
	// Claim this trim first so that concurrent builds do not all walk the cache.
	if err := writeAtomic(stamp, []byte(strconv.FormatInt(now.Unix(), 10)+"\n")); err != nil {
		return err
	}
	return c.trim(now.Add(-trimAge))
}

// trim deletes entries and stale work directories last used before cutoff.
func (c *cache) trim(cutoff time.Time) error {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(c.dir, name)
		if name == "tmp" {
			// Work directories of builds that died midway (no build runs for a day).
			errs = append(errs, removeOlder(sub, c.now().Add(-trimInterval), true))
			continue
		}
		if len(name) != 2 {
			continue
		}
		if _, err := hex.DecodeString(name); err != nil {
			continue
		}
		errs = append(errs, removeOlder(sub, cutoff, false))
	}
	return errors.Join(errs...)
}

func removeOlder(dir string, cutoff time.Time, all bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if !info.ModTime().Before(cutoff) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if all {
			err = os.RemoveAll(p)
		} else {
			err = os.Remove(p)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("trimming %s: %w", p, err)
		}
	}
	return nil
}
