package server

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// handleJoin adds a learner to the class whose join code the request carries.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if !s.decode(w, r, &req) {
		return
	}
	code := normalizeJoinCode(req.Code)
	if len(code) != 8 {
		s.fail(w, r, http.StatusBadRequest, "code: a join code has 8 letters and digits, like ABCD-EFGH")
		return
	}
	name, err := cleanName(req.Name)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "name %v", err)
		return
	}
	var classID int64
	var className string
	err = s.st.r.QueryRowContext(r.Context(), `SELECT id, name FROM classes WHERE join_code = ?`, code).Scan(&classID, &className)
	if errors.Is(err, sql.ErrNoRows) {
		s.fail(w, r, http.StatusForbidden, "no class has the join code %s: check it with your instructor", displayJoinCode(code))
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "join: %v", err)
		return
	}
	tok := newToken(learnerPrefix)
	pub := newPublicID()
	now := millis(s.cfg.Now())
	// Two learners may pick the same name: the second becomes "Name (2)".
	stored := name
	for n := 2; n < 1000; n++ {
		_, err = s.st.w.ExecContext(r.Context(), `INSERT INTO learners (class_id, public_id, name, token_hash, joined_ms) VALUES (?, ?, ?, ?, ?)`,
			classID, pub, stored, hashToken(tok), now)
		if !isUnique(err) {
			break
		}
		if strings.Contains(err.Error(), "learners.name") {
			suffix := fmt.Sprintf(" (%d)", n)
			stored = truncateRunes(name, api.MaxNameRunes-len(suffix)) + suffix
		} else { // a public id collision (48 random bits): draw another
			pub = newPublicID()
		}
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "join: %v", err)
		return
	}
	s.hub.publish(classID)
	writeJSON(w, http.StatusCreated, api.JoinResponse{Class: className, Learner: pub, Name: stored, Token: tok})
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return strings.TrimSpace(string([]rune(s)[:n]))
}

// learnerAuth answers 401 unless the request carries a learner token.
func (s *Server) learnerAuth(w http.ResponseWriter, r *http.Request) *learner {
	l, err := s.learnerByToken(r.Context(), bearer(r))
	if err == nil {
		return l
	}
	if errors.Is(err, errNoAuth) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mgpu-learn workshop"`)
		s.fail(w, r, http.StatusUnauthorized, "this needs the learner token that 'mgpu-learn workshop join' received")
		return nil
	}
	s.fail(w, r, http.StatusInternalServerError, "auth: %v", err)
	return nil
}

// handleReport stores one check's report; a resend with the same ID is stored once.
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	l := s.learnerAuth(w, r)
	if l == nil {
		return
	}
	var sub api.Submission
	if !s.decode(w, r, &sub) {
		return
	}
	if err := validate(&sub); err != nil {
		s.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	body, err := json.Marshal(&sub)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "report: %v", err)
		return
	}
	var ratio sql.NullFloat64
	if sub.Perf != nil {
		ratio = sql.NullFloat64{Float64: sub.Perf.Ratio, Valid: true}
	}
	res, err := s.st.w.ExecContext(r.Context(), `INSERT INTO submissions
		(learner_id, client_id, exercise, target, verdict, stage, fault, headline, attempt, ratio, received_ms, body)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (learner_id, client_id) DO NOTHING`,
		l.ID, sub.ID, sub.Exercise, sub.Target, sub.Verdict, sub.Stage, sub.Fault, sub.Headline, sub.Attempt, ratio,
		millis(s.cfg.Now()), string(body))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "report: %v", err)
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		writeJSON(w, http.StatusOK, api.SubmitResponse{ID: sub.ID, Duplicate: true})
		return
	}
	s.hub.publish(l.ClassID)
	writeJSON(w, http.StatusCreated, api.SubmitResponse{ID: sub.ID})
}

// handleMe answers what the server holds of the asking learner, nothing of anyone else.
func (s *Server) handleMe(w http.ResponseWriter, r *http.Request) {
	l := s.learnerAuth(w, r)
	if l == nil {
		return
	}
	rows, err := s.st.r.QueryContext(r.Context(), `SELECT client_id, exercise, verdict, stage, received_ms
		FROM submissions WHERE learner_id = ? ORDER BY received_ms, id`, l.ID)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "me: %v", err)
		return
	}
	defer rows.Close()
	me := api.MeResponse{Class: l.ClassName, Name: l.Name, Submissions: []api.MySubmitted{}}
	for rows.Next() {
		var m api.MySubmitted
		var ms int64
		if err := rows.Scan(&m.ID, &m.Exercise, &m.Verdict, &m.Stage, &ms); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "me: %v", err)
			return
		}
		m.Received = fromMillis(ms)
		me.Submissions = append(me.Submissions, m)
	}
	if err := rows.Err(); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "me: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, me)
}
