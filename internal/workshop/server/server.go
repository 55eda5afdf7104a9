// Package server is the class server of instructor-led workshops (`mgpu-learn workshop serve`):
// learners join a class with its join code and post every check's report; the instructor
// watches a live dashboard (grid, stuck learners, performance histograms, leaderboards) and
// exports CSV and JUnit. State lives in one SQLite file (WAL, synchronous=FULL); a file may
// hold several classes, each with its own join code and instructor token.
//
// The wire contract is package api; docs/workshop.md is the instructor's run-book.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// Config configures a Server. Only DB is required.
type Config struct {
	DB string // the SQLite file, created when missing

	// Exercises lists exercise ids in course order: the grid's columns follow it (exercises
	// outside it come after, sorted). Optional.
	Exercises []string

	// Stuck rules: a learner is stuck on the exercise of their latest report, not yet passed,
	// after StuckAttempts failed attempts at it, or when its last StuckRepeats attempts failed
	// at the same stage, or when their first report on it is StuckAfter old.
	StuckAttempts int           // default 6
	StuckRepeats  int           // default 3
	StuckAfter    time.Duration // default 20 minutes

	Now func() time.Time // default time.Now; tests move a clock

	// Rate limits, token buckets: per token (learner or instructor) and per client address.
	// A negative rate turns that limit off (benchmarks); zero means the default.
	TokenRate  float64 // requests per second, default 5
	TokenBurst int     // default 60
	IPRate     float64 // default 50 (a classroom may sit behind one NAT address)
	IPBurst    int     // default 300

	MaxStreams int // concurrent dashboard event streams, default 64
}

func (c *Config) defaults() {
	if c.StuckAttempts <= 0 {
		c.StuckAttempts = 6
	}
	if c.StuckRepeats <= 0 {
		c.StuckRepeats = 3
	}
	if c.StuckAfter <= 0 {
		c.StuckAfter = 20 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.TokenRate == 0 {
		c.TokenRate = 5
	}
	if c.TokenBurst == 0 {
		c.TokenBurst = 60
	}
	if c.IPRate == 0 {
		c.IPRate = 50
	}
	if c.IPBurst == 0 {
		c.IPBurst = 300
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 64
	}
}

// Server serves one class database.
type Server struct {
	cfg     Config
	st      *store
	byToken *limiter
	byIP    *limiter
	hub     *hub
	order   map[string]int // exercise id → course position

	stopOnce sync.Once
	stop     chan struct{} // closed when event streams must end
}

// Open opens (creating and migrating when needed) the class database.
func Open(cfg Config) (*Server, error) {
	cfg.defaults()
	st, err := openStore(context.Background(), cfg.DB)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		st:      st,
		byToken: newLimiter(cfg.TokenRate, cfg.TokenBurst, cfg.Now),
		byIP:    newLimiter(cfg.IPRate, cfg.IPBurst, cfg.Now),
		hub:     newHub(cfg.MaxStreams),
		order:   map[string]int{},
		stop:    make(chan struct{}),
	}
	for i, id := range cfg.Exercises {
		if _, ok := s.order[id]; !ok {
			s.order[id] = i
		}
	}
	return s, nil
}

// Close ends the event streams and closes the database.
func (s *Server) Close() error {
	s.EndStreams()
	return s.st.close()
}

// EndStreams ends every open dashboard event stream (they would otherwise hold a graceful
// shutdown until its deadline).
func (s *Server) EndStreams() {
	s.stopOnce.Do(func() { close(s.stop) })
}

// connTimeouts bound a slow client's hold on a connection (tests shorten them).
var connTimeouts = struct{ header, read, write time.Duration }{10 * time.Second, 30 * time.Second, 30 * time.Second}

// Serve serves on ln until ctx ends, then shuts down gracefully (in-flight requests finish,
// up to 10 s).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: connTimeouts.header,
		ReadTimeout:       connTimeouts.read, // the event stream lifts both for itself
		WriteTimeout:      connTimeouts.write,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	hs.RegisterOnShutdown(s.EndStreams)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// ClassInfo describes a class. InstructorToken is set only when it was just made (CreateClass,
// RotateToken): the database keeps its hash, never the token.
type ClassInfo struct {
	Name            string
	JoinCode        string // as handed out: ABCD-EFGH
	InstructorToken string
	Created         time.Time
	Learners        int
	Reports         int
}

// Errors of the class commands.
var (
	ErrNoClass   = errors.New("no such class")
	ErrClassName = errors.New("class name") // taken, or not allowed
)

// CreateClass makes a class with a fresh join code and instructor token.
func (s *Server) CreateClass(name string) (ClassInfo, error) {
	name, err := cleanName(name)
	if err != nil {
		return ClassInfo{}, fmt.Errorf("%w %v", ErrClassName, err)
	}
	tok := newToken(instructorPrefix)
	now := s.cfg.Now()
	for range 5 { // a join code collision is rare; try another
		code := newJoinCode()
		_, err = s.st.w.Exec(`INSERT INTO classes (name, join_code, token_hash, created_ms) VALUES (?, ?, ?, ?)`,
			name, code, hashToken(tok), millis(now))
		if err == nil {
			return ClassInfo{Name: name, JoinCode: displayJoinCode(code), InstructorToken: tok, Created: now.UTC()}, nil
		}
		if isUnique(err) && strings.Contains(err.Error(), "classes.name") {
			return ClassInfo{}, fmt.Errorf("%w %q is taken", ErrClassName, name)
		}
		if !isUnique(err) {
			return ClassInfo{}, err
		}
	}
	return ClassInfo{}, err
}

// RotateToken gives the class a new instructor token; the old one stops working at once.
func (s *Server) RotateToken(name string) (ClassInfo, error) {
	tok := newToken(instructorPrefix)
	res, err := s.st.w.Exec(`UPDATE classes SET token_hash = ? WHERE name = ?`, hashToken(tok), name)
	if err != nil {
		return ClassInfo{}, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ClassInfo{}, fmt.Errorf("%w: %q", ErrNoClass, name)
	}
	list, err := s.classes(name)
	if err != nil || len(list) != 1 {
		return ClassInfo{Name: name, InstructorToken: tok}, err
	}
	list[0].InstructorToken = tok
	return list[0], nil
}

// Classes lists the database's classes by name, without tokens.
func (s *Server) Classes() ([]ClassInfo, error) { return s.classes("") }

// classes lists the classes, or the one named.
func (s *Server) classes(name string) ([]ClassInfo, error) {
	rows, err := s.st.r.Query(`SELECT c.name, c.join_code, c.created_ms,
		(SELECT count(*) FROM learners l WHERE l.class_id = c.id),
		(SELECT count(*) FROM submissions x JOIN learners l ON l.id = x.learner_id WHERE l.class_id = c.id)
		FROM classes c WHERE ? = '' OR c.name = ? ORDER BY c.name`, name, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ClassInfo
	for rows.Next() {
		var c ClassInfo
		var ms int64
		if err := rows.Scan(&c.Name, &c.JoinCode, &ms, &c.Learners, &c.Reports); err != nil {
			return nil, err
		}
		c.JoinCode = displayJoinCode(c.JoinCode)
		c.Created = fromMillis(ms)
		out = append(out, c)
	}
	return out, rows.Err()
}

// cleanName trims a display name and checks it: 1 to MaxNameRunes runes, printable. The error
// reads after the field's name: "name is empty".
func cleanName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return "", errors.New("is not valid UTF-8")
	}
	if s == "" {
		return "", errors.New("is empty")
	}
	if n := utf8.RuneCountInString(s); n > api.MaxNameRunes {
		return "", fmt.Errorf("has %d characters, at most %d", n, api.MaxNameRunes)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return "", fmt.Errorf("has a control or invisible character (%U)", r)
		}
	}
	return s, nil
}

// integrity runs SQLite's integrity check: "ok" or the problems found.
func (s *Server) integrity() (string, error) {
	rows, err := s.st.r.Query(`PRAGMA integrity_check`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n"), rows.Err()
}
