package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// Tokens are 32 random bytes, base64url, behind a prefix that says whose they are. Only their
// SHA-256 is stored; a request's token is hashed, looked up by hash and compared in constant time.
const (
	instructorPrefix = "mgi_"
	learnerPrefix    = "mgl_"
	maxTokenLen      = 128
	cookieName       = "mgpu_instructor"
)

// joinAlphabet has no 0/O or 1/I: join codes are read aloud and copied from a projector.
const joinAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func newToken(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// newJoinCode returns 8 characters (40 bits) from joinAlphabet, stored without the dash.
func newJoinCode() string {
	b := make([]byte, 8)
	rand.Read(b)
	for i := range b {
		b[i] = joinAlphabet[int(b[i])%len(joinAlphabet)] // 256 is a multiple of 32: uniform
	}
	return string(b)
}

// normalizeJoinCode accepts what a person types: any case, spaces and dashes anywhere.
func normalizeJoinCode(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if r == '-' || r == ' ' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// displayJoinCode is the stored code as people see it: ABCD-EFGH.
func displayJoinCode(c string) string {
	if len(c) == 8 {
		return c[:4] + "-" + c[4:]
	}
	return c
}

func newPublicID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "l" + hex.EncodeToString(b)
}

var errNoAuth = errors.New("no valid token")

// bearer returns the request's bearer token, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > len(api.HeaderAuthPrefix) && strings.EqualFold(h[:len(api.HeaderAuthPrefix)], api.HeaderAuthPrefix) {
		return strings.TrimSpace(h[len(api.HeaderAuthPrefix):])
	}
	return ""
}

// requestToken is the token a request carries: the Authorization header, else the dashboard's
// cookie. Used to key the rate limiter; handlers ask for the kind they accept.
func requestToken(r *http.Request) string {
	if t := bearer(r); t != "" {
		return t
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return c.Value
	}
	return ""
}

// learner is an authenticated learner.
type learner struct {
	ID        int64
	PublicID  string
	Name      string
	ClassID   int64
	ClassName string
}

// class is an authenticated class (the instructor's view).
type class struct {
	ID   int64
	Name string
}

func (s *Server) learnerByToken(ctx context.Context, tok string) (*learner, error) {
	if !strings.HasPrefix(tok, learnerPrefix) || len(tok) > maxTokenLen {
		return nil, errNoAuth
	}
	want := hashToken(tok)
	var l learner
	var got []byte
	err := s.st.r.QueryRowContext(ctx, `SELECT l.id, l.public_id, l.name, l.token_hash, c.id, c.name
		FROM learners l JOIN classes c ON c.id = l.class_id WHERE l.token_hash = ?`, want).
		Scan(&l.ID, &l.PublicID, &l.Name, &got, &l.ClassID, &l.ClassName)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoAuth
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return nil, errNoAuth
	}
	return &l, nil
}

func (s *Server) classByToken(ctx context.Context, tok string) (*class, error) {
	if !strings.HasPrefix(tok, instructorPrefix) || len(tok) > maxTokenLen {
		return nil, errNoAuth
	}
	want := hashToken(tok)
	var c class
	var got []byte
	err := s.st.r.QueryRowContext(ctx, `SELECT id, name, token_hash FROM classes WHERE token_hash = ?`, want).
		Scan(&c.ID, &c.Name, &got)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoAuth
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return nil, errNoAuth
	}
	return &c, nil
}
