package server

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// Body limits of the routes that take a body; every other route takes none.
const (
	smallBody = 4 << 10 // join, login
	noBody    = 0
)

// Handler is the server's whole HTTP surface: the API, the dashboard, its event stream, the
// exports and the static files, behind the rate and size limits.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(api.PathJoin, s.route(http.MethodPost, smallBody, s.handleJoin))
	mux.Handle(api.PathReports, s.route(http.MethodPost, api.MaxBodyBytes, s.handleReport))
	mux.Handle(api.PathMe, s.route(http.MethodGet, noBody, s.handleMe))
	mux.Handle(api.PathClassStatus, s.route(http.MethodGet, noBody, s.instructor(s.handleStatus)))
	mux.Handle("/api/", s.route("", noBody, nil))

	mux.Handle("/{$}", s.route(http.MethodGet, noBody, s.handleDashboard))
	mux.Handle("/live", s.route(http.MethodGet, noBody, s.instructor(s.handleLive)))
	mux.Handle("/events", s.route(http.MethodGet, noBody, s.instructor(s.handleEvents)))
	mux.Handle("/learner/{id}", s.route(http.MethodGet, noBody, s.instructor(s.handleLearner)))
	mux.Handle("/login", s.route(http.MethodGet+","+http.MethodPost, smallBody, s.handleLogin))
	mux.Handle("/logout", s.route(http.MethodPost, smallBody, s.handleLogout))
	mux.Handle("/export/reports.csv", s.route(http.MethodGet, noBody, s.instructor(s.handleReportsCSV)))
	mux.Handle("/export/grid.csv", s.route(http.MethodGet, noBody, s.instructor(s.handleGridCSV)))
	mux.Handle("/export/junit.xml", s.route(http.MethodGet, noBody, s.instructor(s.handleJUnit)))
	mux.Handle("/static/", s.route(http.MethodGet, noBody, staticHandler().ServeHTTP))
	mux.Handle("/healthz", s.route(http.MethodGet, noBody, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}))
	mux.Handle("/", s.route("", noBody, nil))
	return s.guard(mux)
}

// guard sets the security headers and applies the rate limits: per client address for every
// request, and per token for requests that carry one.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		ip := clientIP(r)
		ok, wait := s.byIP.allow("ip:" + ip)
		if ok {
			if tok := requestToken(r); tok != "" {
				ok, wait = s.byToken.allow("tok:" + hex.EncodeToString(hashToken(tok)[:12]))
			}
		}
		if !ok {
			h.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			s.fail(w, r, http.StatusTooManyRequests, "too many requests: slow down and retry after %d s", int(math.Ceil(wait.Seconds())))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// route checks the method (methods is a comma-separated list; "" answers 404 to everything)
// and the body size, then calls h.
func (s *Server) route(methods string, maxBody int64, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h == nil {
			s.fail(w, r, http.StatusNotFound, "no such page: %s", r.URL.Path)
			return
		}
		if !methodIn(r.Method, methods) {
			w.Header().Set("Allow", strings.ReplaceAll(methods, ",", ", "))
			s.fail(w, r, http.StatusMethodNotAllowed, "%s does not take %s", r.URL.Path, r.Method)
			return
		}
		if r.ContentLength > maxBody {
			s.fail(w, r, http.StatusRequestEntityTooLarge, "request body of %d bytes is over the limit of %d", r.ContentLength, maxBody)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h(w, r)
	})
}

func methodIn(m, list string) bool {
	for l := range strings.SplitSeq(list, ",") {
		if l == m || (l == http.MethodGet && m == http.MethodHead) {
			return true
		}
	}
	return false
}

// fail answers an error: api.Error JSON on the API and the exports, plain text elsewhere.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if code >= 500 {
		log.Printf("workshop server: %s %s: %s", r.Method, r.URL.Path, msg)
		msg = "internal error; the server's log has the details"
	}
	if strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/export/") {
		writeJSON(w, code, api.Error{Error: msg})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// decode reads the request's JSON body into v. It answers 415, 413 or 400 itself and returns
// false when the body is not one well-formed JSON value of v's shape.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			s.fail(w, r, http.StatusUnsupportedMediaType, "the body must be application/json, not %q", ct)
			return false
		}
	}
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil {
		if _, e := dec.Token(); !errors.Is(e, io.EOF) {
			err = errors.New("more data after the JSON value")
			if e != nil && !isSyntax(e) {
				err = e
			}
		}
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		s.fail(w, r, http.StatusRequestEntityTooLarge, "request body is over the limit of %d bytes", tooBig.Limit)
	case errors.As(err, &typeErr):
		s.fail(w, r, http.StatusBadRequest, "bad JSON: field %q must be %s, not %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.As(err, &syntax):
		s.fail(w, r, http.StatusBadRequest, "bad JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.Is(err, io.EOF):
		s.fail(w, r, http.StatusBadRequest, "empty body: expected a JSON object")
	default:
		s.fail(w, r, http.StatusBadRequest, "bad JSON: %v", err)
	}
	return false
}

func isSyntax(err error) bool {
	var syntax *json.SyntaxError
	return errors.As(err, &syntax)
}
