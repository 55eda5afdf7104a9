package server

import (
	"bytes"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"ratio": func(v float64) string { return formatRatio(v) + "×" },
	"num":   func(v float64) string { return formatRatio(v) },
	"short": func(ex string) string { _, name, _ := strings.Cut(ex, "/"); return name },
	"module": func(ex string) string {
		mod, _, _ := strings.Cut(ex, "/")
		return mod
	},
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05") },
	"stamp": func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
}).ParseFS(templateFS, "templates/*.html"))

func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	fsrv := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		fsrv.ServeHTTP(w, r)
	})
}

// classHandler is a handler for the instructor of class c.
type classHandler func(w http.ResponseWriter, r *http.Request, c *class)

// instructorAuth finds the class of the request's instructor token: the Authorization header
// (scripts, `workshop status`) or the dashboard's cookie.
func (s *Server) instructorAuth(r *http.Request) (*class, string, error) {
	tok := bearer(r)
	if tok == "" {
		if ck, err := r.Cookie(cookieName); err == nil {
			tok = ck.Value
		}
	}
	if tok == "" {
		return nil, "", errNoAuth
	}
	c, err := s.classByToken(r.Context(), tok)
	return c, tok, err
}

// instructor wraps h: 401 without an instructor token, 403 for a learner's token.
func (s *Server) instructor(h classHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, tok, err := s.instructorAuth(r)
		if err != nil {
			s.denyInstructor(w, r, tok, err)
			return
		}
		h(w, r, c)
	}
}

func (s *Server) denyInstructor(w http.ResponseWriter, r *http.Request, tok string, err error) {
	switch {
	case !errors.Is(err, errNoAuth):
		s.fail(w, r, http.StatusInternalServerError, "auth: %v", err)
	case strings.HasPrefix(tok, learnerPrefix):
		s.fail(w, r, http.StatusForbidden, "a learner's token does not open the instructor's pages")
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="mgpu-learn workshop"`)
		s.fail(w, r, http.StatusUnauthorized, "this needs the class's instructor token (log in at /login)")
	}
}

func setSession(w http.ResponseWriter, r *http.Request, tok string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: tok, Path: "/", MaxAge: 7 * 24 * 3600,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
}

// handleDashboard is GET /: the dashboard for the logged-in instructor. "/?token=T" logs in
// with T and redirects to "/" so the token leaves the address bar.
func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) {
	if tok := r.URL.Query().Get("token"); tok != "" {
		s.login(w, r, tok)
		return
	}
	c, tok, err := s.instructorAuth(r)
	if errors.Is(err, errNoAuth) && !strings.HasPrefix(tok, learnerPrefix) {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	if err != nil {
		s.denyInstructor(w, r, tok, err)
		return
	}
	snap, err := s.snapshot(r.Context(), c)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "dashboard: %v", err)
		return
	}
	s.render(w, r, http.StatusOK, "page", s.dashboardData(snap))
}

// handleLive is GET /live: the dashboard's changing part, fetched by the page on every update.
func (s *Server) handleLive(w http.ResponseWriter, r *http.Request, c *class) {
	snap, err := s.snapshot(r.Context(), c)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "dashboard: %v", err)
		return
	}
	s.render(w, r, http.StatusOK, "live", s.dashboardData(snap))
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.render(w, r, http.StatusOK, "login", loginData{})
		return
	}
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "bad form: %v", err)
		return
	}
	s.login(w, r, strings.TrimSpace(r.PostForm.Get("token")))
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, tok string) {
	_, err := s.classByToken(r.Context(), tok)
	switch {
	case err == nil:
		setSession(w, r, tok)
		http.Redirect(w, r, "/", http.StatusSeeOther)
	case errors.Is(err, errNoAuth):
		msg := "That is not the instructor token of a class on this server."
		if strings.HasPrefix(tok, learnerPrefix) {
			msg = "That is a learner's token: the dashboard needs the class's instructor token."
		}
		s.render(w, r, http.StatusUnauthorized, "login", loginData{Error: msg})
	default:
		s.fail(w, r, http.StatusInternalServerError, "login: %v", err)
	}
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

type loginData struct{ Error string }

// render executes a template into a buffer first, so a template error becomes a clean 500.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, data any) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "template %s: %v", name, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	b.WriteTo(w)
}

// dashboardData is the dashboard's view model.
type dashboardData struct {
	Class     string
	Generated time.Time
	Reports   int
	Columns   []exerciseView
	Rows      []rowView
	Stuck     []api.StuckReport
}

type rowView struct {
	Learner  string
	Name     string
	LastSeen string
	Stuck    bool
	Cells    []cellView
}

type cellView struct {
	Exercise string
	api.LearnerCell
	Title string
}

func (s *Server) dashboardData(snap *snapshot) *dashboardData {
	d := &dashboardData{Class: snap.Class, Generated: snap.Generated, Reports: snap.Reports, Columns: snap.Exercises, Stuck: snap.Stuck}
	stuck := map[string]bool{}
	for _, st := range snap.Stuck {
		stuck[st.Learner] = true
	}
	for _, l := range snap.Learners {
		row := rowView{Learner: l.Learner, Name: l.Name, LastSeen: s.ago(l.LastSeen), Stuck: stuck[l.Learner]}
		for _, ex := range snap.Exercises {
			c := l.Cells[ex.ID]
			cv := cellView{Exercise: ex.ID, LearnerCell: c}
			switch c.State {
			case statePassed:
				cv.Title = fmt.Sprintf("%s: passed after %d attempts", ex.ID, c.Attempts)
			case stateFailing:
				cv.Title = fmt.Sprintf("%s: %d attempts, last failed at %s", ex.ID, c.Attempts, c.Stage)
			default:
				cv.Title = ex.ID + ": not started"
			}
			if c.Ratio > 0 {
				cv.Title += fmt.Sprintf("; best ratio %s×", formatRatio(c.Ratio))
			}
			row.Cells = append(row.Cells, cv)
		}
		d.Rows = append(d.Rows, row)
	}
	return d
}

// ago says how long ago t was, for people.
func (s *Server) ago(t time.Time) string {
	d := s.cfg.Now().Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02")
}

// learnerPage is one learner's reports, newest first, with the code they chose to share.
type learnerPage struct {
	Class   string
	Name    string
	Learner string
	Joined  time.Time
	Reports []learnerReport
}

type learnerReport struct {
	Received time.Time
	api.Submission
	HasRatio bool
}

func (s *Server) handleLearner(w http.ResponseWriter, r *http.Request, c *class) {
	id := r.PathValue("id")
	p := learnerPage{Class: c.Name, Learner: id}
	var lid, joined int64
	err := s.st.r.QueryRowContext(r.Context(), `SELECT id, name, joined_ms FROM learners WHERE public_id = ? AND class_id = ?`, id, c.ID).
		Scan(&lid, &p.Name, &joined)
	if errors.Is(err, sql.ErrNoRows) {
		s.fail(w, r, http.StatusNotFound, "no learner %q in this class", clip(id))
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "learner: %v", err)
		return
	}
	p.Joined = fromMillis(joined)
	rows, err := s.st.r.QueryContext(r.Context(), `SELECT received_ms, body FROM submissions WHERE learner_id = ?
		ORDER BY received_ms DESC, id DESC LIMIT 500`, lid)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "learner: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var ms int64
		var body string
		if err := rows.Scan(&ms, &body); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "learner: %v", err)
			return
		}
		rep := learnerReport{Received: fromMillis(ms)}
		if err := json.Unmarshal([]byte(body), &rep.Submission); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "learner: stored report: %v", err)
			return
		}
		rep.HasRatio = rep.Perf != nil
		p.Reports = append(p.Reports, rep)
	}
	if err := rows.Err(); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "learner: %v", err)
		return
	}
	s.render(w, r, http.StatusOK, "learner", p)
}
