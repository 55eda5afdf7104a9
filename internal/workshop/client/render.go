package client

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// Cell marks of the class grid.
const (
	markPassed  = "✓"
	markFailing = "✗"
	markNone    = "·"
)

var moduleID = regexp.MustCompile(`^module([0-9]+)/`)

// Abbreviate gives each exercise id a short column label: "module2/pingpong" is "2a" when it is
// module 2's first column, "2b" for its second, and so on; ids of another form are "e1", "e2"...
func Abbreviate(ids []string) map[string]string {
	out := make(map[string]string, len(ids))
	next := map[string]int{}
	other := 0
	for _, id := range ids {
		if _, dup := out[id]; dup {
			continue
		}
		if m := moduleID.FindStringSubmatch(id); m != nil {
			n := next[m[1]]
			next[m[1]]++
			out[id] = m[1] + letters(n)
			continue
		}
		other++
		out[id] = "e" + strconv.Itoa(other)
	}
	return out
}

// letters is 0 → "a", 25 → "z", 26 → "aa".
func letters(n int) string {
	s := ""
	for {
		s = string(rune('a'+n%26)) + s
		n = n/26 - 1
		if n < 0 {
			return s
		}
	}
}

// WriteClass writes the instructor's terminal view of the class: a learners × exercises grid
// no wider than width (split into blocks of columns when the exercises do not fit), the key to
// the abbreviated columns, and the learners who seem stuck, with the reasons.
func WriteClass(w io.Writer, cs *api.ClassStatus, width int, now time.Time) {
	if width < 40 {
		width = 40
	}
	fmt.Fprintf(w, "Class %q: %d learners, %d exercises, %d stuck", printable(cs.Class), len(cs.Learners), len(cs.Exercises), len(cs.Stuck))
	if !cs.Generated.IsZero() {
		fmt.Fprintf(w, " (as of %s)", cs.Generated.Local().Format("15:04:05"))
	}
	fmt.Fprintln(w)
	if len(cs.Learners) == 0 {
		fmt.Fprintln(w, "\nNo learner has joined yet.")
	}
	abbr := Abbreviate(cs.Exercises) // labels are made of digits and letters only
	cellW := 4
	for _, a := range abbr {
		cellW = max(cellW, utf8.RuneCountInString(a)+1)
	}
	nameW := 7
	for _, l := range cs.Learners {
		nameW = max(nameW, utf8.RuneCountInString(l.Name))
	}
	nameW = min(nameW, 18)
	const seenW = 5
	perBlock := max((width-nameW-1-seenW)/cellW, 1)

	for start := 0; start < len(cs.Exercises) && len(cs.Learners) > 0; start += perBlock {
		cols := cs.Exercises[start:min(start+perBlock, len(cs.Exercises))]
		var b strings.Builder
		b.WriteString("\n" + pad("learner", nameW) + " " + pad("seen", seenW))
		for _, id := range cols {
			b.WriteString(pad(abbr[id], cellW))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		passed := make([]int, len(cols))
		for _, l := range cs.Learners {
			b.Reset()
			b.WriteString(pad(clipRunes(printable(l.Name), nameW), nameW) + " " + pad(ago(l.LastSeen, now), seenW))
			for i, id := range cols {
				cell, ok := l.Cells[id]
				mark := markNone
				switch {
				case !ok:
				case cell.State == "passed":
					mark = markPassed
					passed[i]++
				case cell.State == "failing" || cell.Attempts > 0 && cell.State != "not-started":
					mark = markFailing + strconv.Itoa(min(cell.Attempts, 99))
				}
				b.WriteString(pad(mark, cellW))
			}
			fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		}
		b.Reset()
		b.WriteString(pad("passed", nameW) + " " + pad("", seenW))
		for _, n := range passed {
			b.WriteString(pad(strconv.Itoa(n), cellW))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}

	if len(cs.Exercises) > 0 {
		fmt.Fprintf(w, "\n%s passed  %sN failing after N attempts  %s not started\n", markPassed, markFailing, markNone)
		var line string
		for _, id := range cs.Exercises {
			item := abbr[id] + " " + printable(id)
			if line != "" && utf8.RuneCountInString(line)+3+utf8.RuneCountInString(item) > width {
				fmt.Fprintln(w, line)
				line = ""
			}
			if line != "" {
				line += "   "
			}
			line += item
		}
		if line != "" {
			fmt.Fprintln(w, line)
		}
	}

	if len(cs.Stuck) > 0 {
		fmt.Fprintf(w, "\nStuck (%d):\n", len(cs.Stuck))
		exW := 0
		for _, s := range cs.Stuck {
			exW = max(exW, utf8.RuneCountInString(s.Exercise))
		}
		for _, s := range cs.Stuck {
			line := "  " + pad(clipRunes(printable(s.Name), nameW), nameW) + " " + pad(printable(s.Exercise), exW) + "  " + printable(s.Reason)
			fmt.Fprintln(w, clipRunes(line, width))
		}
	}
}

// WriteLearner writes a learner's view: the class, what is queued, rejected and sent, and what
// the server holds (me), or why it could not be asked (meErr).
func WriteLearner(w io.Writer, cfg *Config, l *Local, me *api.MeResponse, meErr error, now time.Time) {
	fmt.Fprintf(w, "Class %q at %s, joined as %q", printable(cfg.Class), cfg.URL, printable(cfg.Name))
	if !cfg.Joined.IsZero() {
		fmt.Fprintf(w, " on %s", cfg.Joined.Local().Format("2006-01-02 15:04"))
	}
	fmt.Fprintln(w, ".")
	for _, msg := range l.Warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	fmt.Fprintf(w, "\nReports: %d sent, %d queued, %d rejected by the server.\n", len(l.Sent), len(l.Queued), len(l.Rejected))
	if len(l.Queued) > 0 {
		fmt.Fprintln(w, "\nQueued (oldest first):")
		for _, it := range l.Queued {
			s := it.Submission
			fmt.Fprintf(w, "  %-28s attempt %-3d %-12s queued %s%s\n", s.Exercise, s.Attempt, s.Verdict, it.Queued.Local().Format("15:04:05"), withCode(len(s.Code)))
		}
		if l.Retry.LastError != "" {
			fmt.Fprintf(w, "Last try at %s failed: %s\n", l.Retry.LastTry.Local().Format("15:04:05"), l.Retry.LastError)
			if l.Retry.NextTry.After(now) {
				fmt.Fprintf(w, "Next try at %s, or now with 'mgpu-learn workshop flush'.\n", l.Retry.NextTry.Local().Format("15:04:05"))
			}
		} else {
			fmt.Fprintln(w, "They are being sent in the background ('mgpu-learn workshop flush' sends them now and shows errors).")
		}
	}
	if len(l.Rejected) > 0 {
		fmt.Fprintln(w, "\nRejected by the server (never sent again):")
		for _, r := range l.Rejected {
			fmt.Fprintf(w, "  %-28s attempt %-3d %s\n    %s\n    (%s)\n", r.Submission.Exercise, r.Submission.Attempt, r.Rejected.Local().Format("2006-01-02 15:04"), r.Reason, r.File)
		}
	}
	if len(l.Corrupt) > 0 {
		fmt.Fprintf(w, "\n%d queued report(s) could not be read and were moved aside, in %s.\n", len(l.Corrupt), dirOfFile(l.Corrupt[0]))
	}
	if n := len(l.Sent); n > 0 {
		fmt.Fprintln(w, "\nSent lately:")
		for _, s := range l.Sent[max(n-5, 0):] {
			note := withCode(boolInt(s.Code))
			if s.Duplicate {
				note += " (the server had it already)"
			}
			fmt.Fprintf(w, "  %-28s attempt %-3d %-12s sent %s%s\n", s.Exercise, s.Attempt, s.Verdict, s.Sent.Local().Format("15:04:05"), note)
		}
	}
	fmt.Fprintln(w)
	if meErr != nil {
		fmt.Fprintf(w, "The class server could not be asked what it holds: %v\n", meErr)
		return
	}
	if me == nil {
		return
	}
	fmt.Fprintf(w, "The class server holds %d of your reports", len(me.Submissions))
	if len(me.Submissions) == 0 {
		fmt.Fprintln(w, ".")
		return
	}
	fmt.Fprintln(w, "; the latest per exercise:")
	type agg struct {
		n    int
		last api.MySubmitted
	}
	by := map[string]*agg{}
	var ids []string
	for _, s := range me.Submissions {
		a := by[s.Exercise]
		if a == nil {
			a = &agg{}
			by[s.Exercise] = a
			ids = append(ids, s.Exercise)
		}
		a.n++
		if !s.Received.Before(a.last.Received) {
			a.last = s
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := by[id]
		what := a.last.Verdict
		if a.last.Verdict != "passed" && a.last.Stage != "" {
			what += " at " + a.last.Stage
		}
		when := ago(a.last.Received, now)
		switch when {
		case "now":
			when = "just now"
		case "-":
		default:
			when += " ago"
		}
		fmt.Fprintf(w, "  %-28s %-24s %d report(s), last %s\n", printable(id), printable(what), a.n, when)
	}
}

func withCode(n int) string {
	if n > 0 {
		return ", with your code"
	}
	return ""
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func dirOfFile(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return p
}

// ago is a compact age: "now", "45s", "12m", "3h", "2d"; "-" for a zero time.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 5*time.Second:
		return "now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// printable replaces control characters (terminal escapes in a name a learner chose, say)
// with U+FFFD.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '\uFFFD'
		}
		return r
	}, s)
}

// pad left-aligns s in n columns (runes; the marks are one column wide).
func pad(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}
