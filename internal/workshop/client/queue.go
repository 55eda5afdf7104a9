package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// Item is one queued report.
type Item struct {
	Queued     time.Time      `json:"queued"`
	Submission api.Submission `json:"submission"`
	// File is the item's path (not stored).
	File string `json:"-"`
}

// Rejected is a report the server refused (a 4xx other than 429); it is never sent again.
type Rejected struct {
	Item
	Rejected time.Time `json:"rejected"`
	Status   int       `json:"status"`
	Reason   string    `json:"reason"`
}

// Sent is one line of sent.jsonl.
type Sent struct {
	ID        string    `json:"id"`
	Exercise  string    `json:"exercise"`
	Verdict   string    `json:"verdict"`
	Attempt   int       `json:"attempt"`
	Code      bool      `json:"code,omitempty"` // carried the learner's code
	Sent      time.Time `json:"sent"`
	Duplicate bool      `json:"duplicate,omitempty"` // the server had it already
}

// Retry is the backoff after a failed send (retry.json).
type Retry struct {
	Failures  int       `json:"failures"`
	LastTry   time.Time `json:"last_try"`
	NextTry   time.Time `json:"next_try"`
	LastError string    `json:"last_error"`
}

// sentKeep is how many lines sent.jsonl keeps.
const sentKeep = 500

// encode is a submission's request body: JSON without HTML escaping (C++ code is full of <
// and >, which would otherwise grow sixfold).
func encode(s *api.Submission) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Enqueue puts a submission in the queue, durably, without any network I/O: the caller starts
// the sender afterwards. A submission without an ID gets one. When the body would pass
// api.MaxBodyBytes, shared files are dropped, last first, and notes say which. It returns the
// queue file's path.
func (c *Client) Enqueue(s api.Submission) (file string, notes []string, err error) {
	if s.ID == "" {
		s.ID = NewID()
	}
	s.ID = strings.ToLower(s.ID)
	if !ValidID(s.ID) {
		return "", nil, fmt.Errorf("submission id %q is not 32 hex digits", s.ID)
	}
	for {
		body, err := encode(&s)
		if err != nil {
			return "", notes, err
		}
		// The item's envelope adds a few dozen bytes to the stored file, not to the body.
		if len(body) <= api.MaxBodyBytes {
			break
		}
		if len(s.Code) == 0 {
			return "", notes, fmt.Errorf("the report is %d bytes, over the class server's limit of %d", len(body), api.MaxBodyBytes)
		}
		last := s.Code[len(s.Code)-1]
		s.Code = s.Code[:len(s.Code)-1]
		notes = append(notes, fmt.Sprintf("%s not shared: the report would pass the %d KiB limit", last.Name, api.MaxBodyBytes>>10))
	}
	if err := c.ensureDir(); err != nil {
		return "", notes, err
	}
	if err := os.MkdirAll(c.path(queueDir), 0o700); err != nil {
		return "", notes, err
	}
	now := c.now().UTC()
	it := Item{Queued: now, Submission: s}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&it); err != nil {
		return "", notes, err
	}
	name := c.path(queueDir, now.Format("20060102T150405.000000000Z")+"-"+s.ID+".json")
	if err := writeAtomic(name, b.Bytes(), 0o600); err != nil {
		return "", notes, fmt.Errorf("queueing the report in %s: %w", c.path(queueDir), err)
	}
	return name, notes, nil
}

// queueFiles lists the queue's items, oldest first. Temporary files of an interrupted
// Enqueue (".tmp-*") are skipped, and removed once they are an hour old.
func (c *Client) queueFiles() ([]string, error) {
	return c.listJSON(queueDir)
}

func (c *Client) listJSON(dir string) ([]string, error) {
	ents, err := os.ReadDir(c.path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".tmp-") {
			if fi, err := e.Info(); err == nil && c.now().Sub(fi.ModTime()) > time.Hour {
				_ = os.Remove(c.path(dir, n))
			}
			continue
		}
		if e.Type().IsRegular() && strings.HasSuffix(n, ".json") {
			out = append(out, c.path(dir, n))
		}
	}
	sort.Strings(out)
	return out, nil
}

// readItem reads a queue file; a file that cannot be used is moved to corrupt/ and the
// warning says so, naming both files.
func (c *Client) readItem(name string) (*Item, string) {
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "" // sent or moved by another process meanwhile
	}
	var why string
	var it Item
	if err == nil {
		if jerr := json.Unmarshal(data, &it); jerr != nil {
			why = fmt.Sprintf("not a valid report (%v)", jerr)
		}
	}
	switch {
	case err != nil:
		why = fmt.Sprintf("unreadable (%v)", err)
	case why != "":
	case !ValidID(it.Submission.ID):
		why = "its submission has no valid id"
	case !strings.HasSuffix(filepath.Base(name), "-"+it.Submission.ID+".json"):
		why = "its id does not match its name"
	case it.Submission.Exercise == "":
		why = "its submission names no exercise"
	}
	if why == "" {
		it.File = name
		return &it, ""
	}
	return nil, c.moveAside(name, why)
}

// moveAside moves an unusable queue file to corrupt/ and returns the warning.
func (c *Client) moveAside(name, why string) string {
	dst := c.path(corruptDir, filepath.Base(name))
	err := os.MkdirAll(c.path(corruptDir), 0o700)
	if err == nil {
		err = os.Rename(name, dst)
	}
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(name); errors.Is(serr, fs.ErrNotExist) {
			return "" // another process moved it first
		}
	}
	if err != nil {
		// It cannot be moved: take it out of the queue by name at least.
		dst = name + ".corrupt"
		if rerr := os.Rename(name, dst); rerr != nil {
			return fmt.Sprintf("queued report %s is %s and could not be moved aside (%v); remove it by hand", name, why, rerr)
		}
	}
	syncDir(filepath.Dir(name))
	return fmt.Sprintf("queued report %s was %s; moved it to %s (it will not be sent)", name, why, dst)
}

// reject moves an item to rejected/ with the server's reason.
func (c *Client) reject(it *Item, status int, reason string) (*Rejected, error) {
	if err := os.MkdirAll(c.path(rejectedDir), 0o700); err != nil {
		return nil, err
	}
	r := &Rejected{Item: *it, Rejected: c.now().UTC(), Status: status, Reason: reason}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	dst := c.path(rejectedDir, filepath.Base(it.File))
	if err := writeAtomic(dst, append(data, '\n'), 0o600); err != nil {
		return nil, err
	}
	if err := os.Remove(it.File); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	syncDir(filepath.Dir(it.File))
	r.File = dst
	return r, nil
}

// logSent appends to sent.jsonl, keeping the newest sentKeep lines.
func (c *Client) logSent(s Sent) error {
	line, err := json.Marshal(s)
	if err != nil {
		return err
	}
	name := c.path(sentName)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(line, '\n'))
	fi, serr := f.Stat()
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	if serr == nil && fi.Size() > int64(sentKeep)*600 {
		sent, _ := c.readSent()
		if len(sent) > sentKeep {
			sent = sent[len(sent)-sentKeep:]
		}
		var b bytes.Buffer
		for _, s := range sent {
			l, _ := json.Marshal(s)
			b.Write(append(l, '\n'))
		}
		return writeAtomic(name, b.Bytes(), 0o600)
	}
	return nil
}

// readSent reads sent.jsonl; lines that cannot be read are skipped.
func (c *Client) readSent() ([]Sent, error) {
	f, err := os.Open(c.path(sentName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Sent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var s Sent
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.ID != "" {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// readRetry reads retry.json; a missing or unreadable file is no backoff.
func (c *Client) readRetry() Retry {
	var r Retry
	data, err := os.ReadFile(c.path(retryName))
	if err == nil && json.Unmarshal(data, &r) != nil {
		r = Retry{}
	}
	return r
}

func (c *Client) writeRetry(r Retry) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(c.path(retryName), append(data, '\n'), 0o600)
}

// Local is what the workspace knows of its reports, without asking the server.
type Local struct {
	Queued   []Item
	Rejected []Rejected
	Sent     []Sent // oldest first, the newest sentKeep
	Retry    Retry  // zero when the last send worked
	// Warnings name files that could not be read (corrupt queue items are moved aside).
	Warnings []string
	// Corrupt lists the files in corrupt/.
	Corrupt []string
}

// Local reads the queue, the rejected reports, the sent log and the backoff.
func (c *Client) Local() (*Local, error) {
	l := &Local{Retry: c.readRetry()}
	names, err := c.queueFiles()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		it, warn := c.readItem(n)
		if warn != "" {
			l.Warnings = append(l.Warnings, warn)
		}
		if it != nil {
			l.Queued = append(l.Queued, *it)
		}
	}
	rej, err := c.listJSON(rejectedDir)
	if err != nil {
		return nil, err
	}
	for _, n := range rej {
		var r Rejected
		data, err := os.ReadFile(n)
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err != nil {
			l.Warnings = append(l.Warnings, fmt.Sprintf("rejected report %s could not be read (%v)", n, err))
			continue
		}
		r.File = n
		l.Rejected = append(l.Rejected, r)
	}
	if ents, err := os.ReadDir(c.path(corruptDir)); err == nil {
		for _, e := range ents {
			l.Corrupt = append(l.Corrupt, c.path(corruptDir, e.Name()))
		}
	}
	l.Sent, err = c.readSent()
	if err != nil {
		l.Warnings = append(l.Warnings, fmt.Sprintf("%s could not be read (%v)", c.path(sentName), err))
	}
	return l, nil
}

// writeAtomic replaces name with data: temporary file in the same folder, fsync, rename,
// fsync of the folder.
func writeAtomic(name string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(name)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(dir)
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
