package server

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

var (
	idRe       = regexp.MustCompile(`^[0-9a-f]{32}$`)
	exerciseRe = regexp.MustCompile(`^module[0-9]{1,3}/[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	targetRe   = regexp.MustCompile(`^(yours|solution|starter|variant:[A-Za-z0-9][A-Za-z0-9._-]{0,63})$`)
	stageRe    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
)

// Verdicts and faults a report may carry (checker's sets).
var (
	verdicts = []string{"passed", "failed", "refused", "error", "inconclusive"}
	faults   = []string{"", "you", "runner", "machine"}
)

// shortRunes bounds the fields that name things (metric, unit, GPU model, version).
const shortRunes = 256

const (
	maxCodeFiles = 64
	maxAttempt   = 1_000_000
	maxDuration  = 7 * 24 * 3600 // seconds
	maxGPUs      = 4096
)

// validate checks every field of a submission and normalizes the ID to lower case. The error
// names the field.
func validate(s *api.Submission) error {
	s.ID = strings.ToLower(s.ID)
	if !idRe.MatchString(s.ID) {
		return fmt.Errorf("id: want 32 hex digits, got %q", clip(s.ID))
	}
	if !exerciseRe.MatchString(s.Exercise) {
		return fmt.Errorf("exercise: want moduleN/name, got %q", clip(s.Exercise))
	}
	if !targetRe.MatchString(s.Target) {
		return fmt.Errorf("target: want yours, solution, starter or variant:NAME, got %q", clip(s.Target))
	}
	if !slices.Contains(verdicts, s.Verdict) {
		return fmt.Errorf("verdict: want one of %s, got %q", strings.Join(verdicts, ", "), clip(s.Verdict))
	}
	if s.Stage != "" && !stageRe.MatchString(s.Stage) {
		return fmt.Errorf("stage: want a stage name like correctness, got %q", clip(s.Stage))
	}
	if !slices.Contains(faults, s.Fault) {
		return fmt.Errorf("fault: want you, runner, machine or empty, got %q", clip(s.Fault))
	}
	if err := text("headline", s.Headline, api.MaxTextRunes); err != nil {
		return err
	}
	if s.Attempt < 0 || s.Attempt > maxAttempt {
		return fmt.Errorf("attempt: %d is out of range 0..%d", s.Attempt, maxAttempt)
	}
	if !s.Started.IsZero() && (s.Started.Year() < 2000 || s.Started.Year() > 2200) {
		return fmt.Errorf("started: %s is not a plausible time", s.Started.Format("2006-01-02T15:04:05Z07:00"))
	}
	if err := number("duration_s", s.Duration, 0, maxDuration); err != nil {
		return err
	}
	if p := s.Perf; p != nil {
		for _, f := range []struct{ name, v string }{{"perf.metric", p.Metric}, {"perf.unit", p.Unit}, {"perf.case", p.Case}} {
			if err := text(f.name, f.v, shortRunes); err != nil {
				return err
			}
		}
		if err := number("perf.ratio", p.Ratio, 0, 1e6); err != nil {
			return err
		}
		if err := number("perf.yours", p.Yours, -math.MaxFloat64, math.MaxFloat64); err != nil {
			return err
		}
		if err := number("perf.baseline", p.Baseline, -math.MaxFloat64, math.MaxFloat64); err != nil {
			return err
		}
	}
	if len(s.Figures) > api.MaxFigures {
		return fmt.Errorf("figures: %d of them, at most %d", len(s.Figures), api.MaxFigures)
	}
	for i, f := range s.Figures {
		field := fmt.Sprintf("figures[%d]", i)
		if err := text(field+".name", f.Name, shortRunes); err != nil {
			return err
		}
		if err := text(field+".unit", f.Unit, shortRunes); err != nil {
			return err
		}
		if err := number(field+".value", f.Value, -math.MaxFloat64, math.MaxFloat64); err != nil {
			return err
		}
	}
	if s.Machine.GPUs < 0 || s.Machine.GPUs > maxGPUs {
		return fmt.Errorf("machine.gpus: %d is out of range 0..%d", s.Machine.GPUs, maxGPUs)
	}
	for _, f := range []struct{ name, v string }{{"machine.gpu", s.Machine.GPU}, {"machine.driver", s.Machine.Driver}, {"machine.cuda", s.Machine.CUDA}, {"version", s.Version}} {
		if err := text(f.name, f.v, shortRunes); err != nil {
			return err
		}
	}
	if len(s.Code) > maxCodeFiles {
		return fmt.Errorf("code: %d files, at most %d", len(s.Code), maxCodeFiles)
	}
	total := 0
	for i, f := range s.Code {
		field := fmt.Sprintf("code[%d]", i)
		if err := text(field+".name", f.Name, shortRunes); err != nil {
			return err
		}
		if f.Name == "" || path.IsAbs(f.Name) || strings.Contains(f.Name, "\\") || path.Clean(f.Name) != f.Name || strings.HasPrefix(f.Name, "../") || f.Name == ".." {
			return fmt.Errorf("%s.name: want a relative file name like main.cu, got %q", field, clip(f.Name))
		}
		if !utf8.ValidString(f.Content) {
			return fmt.Errorf("%s.content is not valid UTF-8", field)
		}
		total += len(f.Content)
	}
	if total > api.MaxCodeBytes {
		return fmt.Errorf("code: %d bytes of source, at most %d", total, api.MaxCodeBytes)
	}
	return nil
}

// text checks a free-text field: valid UTF-8, at most max runes, no NUL.
func text(field, s string, max int) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Errorf("%s has %d characters, at most %d", field, n, max)
	}
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("%s contains a NUL character", field)
	}
	return nil
}

func number(field string, v, lo, hi float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%s is not a finite number", field)
	}
	if v < lo || v > hi {
		return fmt.Errorf("%s: %g is out of range %g..%g", field, v, lo, hi)
	}
	return nil
}

// clip shortens a bad value for an error message.
func clip(s string) string {
	if utf8.RuneCountInString(s) > 40 {
		return string([]rune(s)[:40]) + "…"
	}
	return s
}
