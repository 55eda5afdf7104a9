package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// testToken is the learner token the fake hands out; tests look for it in every message.
const testToken = "lt_SECRET-3b1f9c0e5d7a"

// fake is a class server in memory: one class, join code "JOIN-CODE".
type fake struct {
	mu       sync.Mutex
	stored   map[string]api.Submission // by id
	posts    int                       // POST /reports requests, resends included
	names    []string
	reject   map[string]int // exercise → status to answer with
	fail     int            // answer every report with this status (5xx, 429) when not 0
	retryHdr string         // Retry-After on failures
	echoAuth bool           // put the Authorization header in error messages (a bad server)
	srv      *httptest.Server
}

func newFake(t *testing.T) *fake {
	f := &fake{stored: map[string]api.Submission{}, reject: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathJoin, func(w http.ResponseWriter, r *http.Request) {
		var jr api.JoinRequest
		if err := json.NewDecoder(r.Body).Decode(&jr); err != nil {
			writeErr(w, 400, "bad json")
			return
		}
		if jr.Code != "JOIN-CODE" {
			writeErr(w, 403, "unknown join code")
			return
		}
		f.mu.Lock()
		f.names = append(f.names, jr.Name)
		f.mu.Unlock()
		json.NewEncoder(w).Encode(api.JoinResponse{Class: "gpu-101", Learner: "l1", Name: jr.Name, Token: testToken})
	})
	mux.HandleFunc("POST "+api.PathReports, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.posts++
		if r.Header.Get("Authorization") != api.HeaderAuthPrefix+testToken {
			writeErr(w, 401, "bad token")
			return
		}
		if f.fail != 0 {
			if f.retryHdr != "" {
				w.Header().Set("Retry-After", f.retryHdr)
			}
			msg := "down for maintenance"
			if f.echoAuth {
				msg += " (you sent " + r.Header.Get("Authorization") + ")"
			}
			writeErr(w, f.fail, msg)
			return
		}
		var s api.Submission
		dec := json.NewDecoder(r.Body)
		if err := dec.Decode(&s); err != nil {
			writeErr(w, 400, "bad json: "+err.Error())
			return
		}
		if code := f.reject[s.Exercise]; code != 0 {
			writeErr(w, code, fmt.Sprintf("exercise %q is not part of this class", s.Exercise))
			return
		}
		if _, dup := f.stored[s.ID]; dup {
			json.NewEncoder(w).Encode(api.SubmitResponse{ID: s.ID, Duplicate: true})
			return
		}
		f.stored[s.ID] = s
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(api.SubmitResponse{ID: s.ID})
	})
	mux.HandleFunc("GET "+api.PathMe, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != api.HeaderAuthPrefix+testToken {
			writeErr(w, 401, "bad token")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		me := api.MeResponse{Class: "gpu-101", Name: "Ada"}
		for _, s := range f.stored {
			me.Submissions = append(me.Submissions, api.MySubmitted{ID: s.ID, Exercise: s.Exercise, Verdict: s.Verdict, Stage: s.Stage, Received: s.Started})
		}
		json.NewEncoder(w).Encode(me)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func writeErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(api.Error{Error: msg})
}

func (f *fake) count() (stored, posts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.stored), f.posts
}

func (f *fake) set(fn func(f *fake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}
