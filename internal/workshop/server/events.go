package server

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// hub tells the open dashboards of a class that something changed. A subscriber's channel holds
// one pending signal: bursts of reports collapse into one update.
type hub struct {
	mu   sync.Mutex
	subs map[int64]map[chan struct{}]bool
	n    int
	max  int
}

func newHub(max int) *hub { return &hub{subs: map[int64]map[chan struct{}]bool{}, max: max} }

var errTooManyStreams = errors.New("too many open dashboards")

func (h *hub) subscribe(classID int64) (chan struct{}, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n >= h.max {
		return nil, nil, errTooManyStreams
	}
	ch := make(chan struct{}, 1)
	if h.subs[classID] == nil {
		h.subs[classID] = map[chan struct{}]bool{}
	}
	h.subs[classID][ch] = true
	h.n++
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.subs[classID][ch] {
			delete(h.subs[classID], ch)
			h.n--
		}
	}, nil
}

func (h *hub) publish(classID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[classID] {
		select {
		case ch <- struct{}{}:
		default: // one is pending already
		}
	}
}

// Event stream pacing: at most one update per updateGap, a comment every keepAlive so proxies
// keep the connection.
const (
	updateGap = time.Second
	keepAlive = 20 * time.Second
)

// handleEvents is the dashboard's server-sent event stream: "update" whenever the class's state
// changed; the page then fetches /live.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, c *class) {
	ch, done, err := s.hub.subscribe(c.ID)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "%v", err)
		return
	}
	defer done()
	// The server's read and write timeouts are for ordinary requests: a stream lives on.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n: connected\n\n")
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		case <-tick.C:
			fmt.Fprint(w, ": ping\n\n")
		case <-ch:
			fmt.Fprintf(w, "event: update\ndata: {\"at\":%q}\n\n", s.cfg.Now().UTC().Format(time.RFC3339))
			if rc.Flush() != nil {
				return
			}
			select { // pace: updates arriving now are coalesced into the next one
			case <-time.After(updateGap):
			case <-r.Context().Done():
				return
			case <-s.stop:
				return
			}
			continue
		}
		if rc.Flush() != nil {
			return
		}
	}
}
