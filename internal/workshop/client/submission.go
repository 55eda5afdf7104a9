package client

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// shortRunes bounds the fields that name things (metric, unit, GPU model, version), as the
// server does.
const shortRunes = 256

// maxCodeFiles is how many opted-in files a submission may carry (the server's limit).
const maxCodeFiles = 64

// NewID returns a fresh submission ID: 32 random hex digits.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; should it, a time-based ID still differs
		// between checks, which is all idempotency needs.
		return fmt.Sprintf("%032x", time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}

// ValidID reports whether id is 32 lower-case hex digits.
func ValidID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// NewSubmission turns a check's report into the submission posted to the class: the verdict,
// the headline of the performance stage and the learner's reported values, never code (see
// ReadCode). attempt is this exercise's attempt number in the workspace.
func NewSubmission(r *checker.Report, attempt int, m api.Machine, version string) api.Submission {
	s := api.Submission{
		ID:       NewID(),
		Exercise: r.Exercise,
		Target:   r.Target,
		Verdict:  r.Verdict,
		Stage:    r.Stage,
		Fault:    r.Fault,
		Headline: cleanText(r.Headline, api.MaxTextRunes),
		Attempt:  max(attempt, 0),
		Started:  r.Started.UTC(),
		Duration: finite(time.Duration(r.Duration).Seconds()),
		Machine:  m,
		Version:  cleanText(version, shortRunes),
	}
	if s.Target == "" {
		s.Target = "yours"
	}
	if s.Duration < 0 {
		s.Duration = 0
	}
	if p := r.Perf; p != nil {
		perf := &api.Perf{
			Metric: cleanText(p.Metric, shortRunes),
			Unit:   cleanText(p.Unit, shortRunes),
			Case:   cleanText(p.Case, shortRunes),
			Ratio:  math.Min(math.Max(finite(float64(p.Ratio)), 0), 1e6),
		}
		for _, c := range p.Cases {
			if c.Case == p.Case {
				perf.Yours, perf.Baseline = finite(float64(c.Yours)), finite(float64(c.Baseline))
			}
		}
		s.Perf = perf
	}
	ranks := map[int]bool{}
	for _, v := range r.Values {
		ranks[v.Rank] = true
	}
	for _, v := range r.Values {
		x := float64(v.Value)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		if len(s.Figures) == api.MaxFigures {
			break
		}
		name := v.Name
		if len(ranks) > 1 {
			name = fmt.Sprintf("%s (rank %d)", v.Name, v.Rank)
		}
		s.Figures = append(s.Figures, api.Figure{Name: cleanText(name, shortRunes), Value: x, Unit: cleanText(v.Unit, shortRunes)})
	}
	return s
}

// MachineOf summarizes the probed facts: GPU count and model, driver, nvcc version, and
// whether the check ran inside a Slurm allocation (getenv("SLURM_JOB_ID") is set). Nothing that
// identifies a person or a host.
func MachineOf(f *probe.Facts, getenv func(string) string) api.Machine {
	var m api.Machine
	if getenv != nil {
		m.Slurm = getenv("SLURM_JOB_ID") != ""
	}
	if f == nil {
		return m
	}
	m.GPUs = len(f.GPUs)
	var names []string
	seen := map[string]bool{}
	for _, g := range f.GPUs {
		if g.Name != "" && !seen[g.Name] {
			seen[g.Name] = true
			names = append(names, g.Name)
		}
	}
	m.GPU = cleanText(strings.Join(names, ", "), shortRunes)
	m.Driver = cleanText(f.Driver, shortRunes)
	if f.NVCC != nil {
		m.CUDA = cleanText(f.NVCC.Version, shortRunes)
	}
	return m
}

// ReadCode reads the learner's files of an exercise (name → path) for a submission the learner
// opted in to share. Files are taken in name order while they fit in api.MaxCodeBytes all
// together; skipped says, in words, which did not fit or could not be read. Invalid UTF-8 is
// replaced, so the server can store the text.
func ReadCode(files map[string]string) (code []api.File, skipped []string) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	total := 0
	for _, n := range names {
		data, err := os.ReadFile(files[n])
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				skipped = append(skipped, fmt.Sprintf("%s (missing)", n))
			} else {
				skipped = append(skipped, fmt.Sprintf("%s (%v)", n, err))
			}
			continue
		}
		text := strings.ToValidUTF8(string(data), "\uFFFD")
		switch {
		case len(code) == maxCodeFiles:
			skipped = append(skipped, fmt.Sprintf("%s (more than %d files)", n, maxCodeFiles))
			continue
		case total+len(text) > api.MaxCodeBytes:
			skipped = append(skipped, fmt.Sprintf("%s (%d bytes would pass the %d KiB limit on shared code)", n, len(text), api.MaxCodeBytes>>10))
			continue
		}
		total += len(text)
		code = append(code, api.File{Name: n, Content: text})
	}
	return code, skipped
}

// cleanText makes s acceptable to the server: valid UTF-8, no NUL, at most n runes (cut with
// an ellipsis).
func cleanText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// finite is v, or 0 when v is NaN or infinite (JSON cannot carry those).
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
