package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite: the binary stays CGO_ENABLED=0
)

// The database is one SQLite file in WAL mode. Every write goes through one connection (SQLite
// has a single writer anyway; one connection keeps BEGIN from ever waiting on another of ours),
// reads through a small pool that runs beside it. synchronous=FULL: a commit is on disk before
// the server answers 2xx, so neither a killed process nor a lost machine loses an acknowledged
// report. A class posts a few reports a second at most; the fsync per commit costs nothing
// there (docs/workshop.md has the measured latency).

// migrations bring the schema from version i to i+1. Append, never edit.
var migrations = []string{
	`CREATE TABLE classes (
		id          INTEGER PRIMARY KEY,
		name        TEXT NOT NULL UNIQUE,
		join_code   TEXT NOT NULL UNIQUE,  -- normalized: 8 letters and digits, no dash
		token_hash  BLOB NOT NULL UNIQUE,  -- SHA-256 of the instructor token
		created_ms  INTEGER NOT NULL
	);
	CREATE TABLE learners (
		id          INTEGER PRIMARY KEY,
		class_id    INTEGER NOT NULL REFERENCES classes(id),
		public_id   TEXT NOT NULL UNIQUE,  -- the opaque id the API shows
		name        TEXT NOT NULL,
		token_hash  BLOB NOT NULL UNIQUE,  -- SHA-256 of the learner token
		joined_ms   INTEGER NOT NULL,
		UNIQUE (class_id, name)
	);
	CREATE TABLE submissions (
		id          INTEGER PRIMARY KEY,
		learner_id  INTEGER NOT NULL REFERENCES learners(id),
		client_id   TEXT NOT NULL,         -- api.Submission.ID: a resend is stored once
		exercise    TEXT NOT NULL,
		target      TEXT NOT NULL,
		verdict     TEXT NOT NULL,
		stage       TEXT NOT NULL,
		fault       TEXT NOT NULL,
		headline    TEXT NOT NULL,
		attempt     INTEGER NOT NULL,
		ratio       REAL,                  -- perf.ratio when performance was judged
		received_ms INTEGER NOT NULL,
		body        TEXT NOT NULL,         -- the whole submission as JSON
		UNIQUE (learner_id, client_id)
	);
	CREATE INDEX submissions_by_learner ON submissions (learner_id, received_ms);`,
}

// store is the class database.
type store struct {
	w *sql.DB // the one writer connection
	r *sql.DB // readers
}

func dsn(path string, query url.Values) string {
	u := url.URL{Scheme: "file", Path: path, RawQuery: query.Encode()}
	return u.String()
}

func openStore(ctx context.Context, path string) (*store, error) {
	if path == "" {
		return nil, errors.New("no database file given")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	w, err := sql.Open("sqlite", dsn(abs, q))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", dsn(abs, rq))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	return &store{w: w, r: r}, nil
}

func (st *store) close() error {
	return errors.Join(st.r.Close(), st.w.Close())
}

// migrate applies the migrations the file lacks, in one transaction.
func migrate(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("not a usable SQLite database: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	version := 0
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this mgpu-learn knows (%d): use a newer mgpu-learn", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(migrations)); err != nil {
		return err
	}
	return tx.Commit()
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// isUnique says whether err is a UNIQUE constraint failure.
func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}
