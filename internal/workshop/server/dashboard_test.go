package server

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/xml"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// seedClass fills a class the way a morning of a workshop might: some pass, some fail, some
// are stuck by each of the three rules. The clock ends 30 minutes after the first report.
func seedClass(e *testEnv) map[string]api.JoinResponse {
	l := map[string]api.JoinResponse{}
	for _, n := range []string{"Ada Lovelace", "Bob", "Chen Wei", "Dana", "Eve <script>alert(1)</script>", "Farid"} {
		l[n] = e.join(n)
	}
	post := func(who string, s api.Submission) {
		e.post(l[who].Token, s)
		e.clock.Advance(30 * time.Second)
	}
	// Ada: passes both, the fastest on peer-copy.
	post("Ada Lovelace", report("module0/devices", "passed", "correctness", 0))
	post("Ada Lovelace", report("module0/peer-copy", "failed", "performance", 0.82))
	post("Ada Lovelace", report("module0/peer-copy", "passed", "performance", 1.31))
	// Bob: passes peer-copy slower than Ada.
	post("Bob", report("module0/devices", "passed", "correctness", 0))
	post("Bob", report("module0/peer-copy", "passed", "performance", 1.08))
	// Chen: fails at correctness three times in a row (stuck: repeated stage).
	post("Chen Wei", report("module0/devices", "passed", "correctness", 0))
	for range 3 {
		post("Chen Wei", report("module0/peer-copy", "failed", "correctness", 0))
	}
	// Dana: six failed attempts at different stages (stuck: attempts).
	for _, st := range []string{"build", "run", "build", "run", "correctness", "performance"} {
		ratio := 0.0
		if st == "performance" {
			ratio = 0.64
		}
		post("Dana", report("module0/devices", "failed", st, ratio))
	}
	// Eve: one failure, then nothing for a long while (stuck: time).
	post("Eve <script>alert(1)</script>", report("module0/devices", "failed", "build", 0))
	// Farid: passes, runs the solution too (not counted in the grid).
	post("Farid", report("module0/devices", "passed", "correctness", 0))
	sol := report("module1/allreduce", "passed", "performance", 2)
	sol.Target = "solution"
	post("Farid", sol)
	post("Farid", report("module0/peer-copy", "passed", "performance", 0.97))
	e.clock.Advance(21 * time.Minute)
	return l
}

func TestStatusGridStuckLeaderboard(t *testing.T) {
	e := newEnv(t, Config{Exercises: []string{"module0/devices", "module0/peer-copy"}})
	seedClass(e)
	st := e.status()
	if !slices.Equal(st.Exercises, []string{"module0/devices", "module0/peer-copy"}) {
		t.Fatalf("columns %v (solution checks must not add module1/allreduce)", st.Exercises)
	}
	var names []string
	cells := map[string]map[string]api.LearnerCell{}
	for _, r := range st.Learners {
		names = append(names, r.Name)
		cells[r.Name] = r.Cells
	}
	if !slices.Equal(names, []string{"Ada Lovelace", "Bob", "Chen Wei", "Dana", "Eve <script>alert(1)</script>", "Farid"}) {
		t.Fatalf("rows %v", names)
	}
	check := func(who, ex, state string, attempts int, stage string, ratio float64) {
		t.Helper()
		c := cells[who][ex]
		if c.State != state || c.Attempts != attempts || c.Stage != stage || c.Ratio != ratio {
			t.Errorf("%s × %s = %+v, want %s/%d/%q/%g", who, ex, c, state, attempts, stage, ratio)
		}
	}
	check("Ada Lovelace", "module0/peer-copy", statePassed, 2, "", 1.31)
	check("Chen Wei", "module0/peer-copy", stateFailing, 3, "correctness", 0)
	check("Dana", "module0/devices", stateFailing, 6, "performance", 0.64)
	check("Dana", "module0/peer-copy", stateNotStarted, 0, "", 0)
	check("Farid", "module0/peer-copy", statePassed, 1, "", 0.97)

	stuck := map[string]string{}
	for _, s := range st.Stuck {
		stuck[s.Name] = s.Exercise + ": " + s.Reason
	}
	want := map[string]string{
		"Chen Wei":                      "module0/peer-copy: failed at correctness 3 times in a row; no progress for 27 min",
		"Dana":                          "module0/devices: 6 failed attempts; no progress for 26 min",
		"Eve <script>alert(1)</script>": "module0/devices: no progress for 23 min",
	}
	if len(stuck) != len(want) {
		t.Errorf("stuck: %v, want %v", stuck, want)
	}
	for who, why := range want {
		if stuck[who] != why {
			t.Errorf("stuck[%s] = %q, want %q", who, stuck[who], why)
		}
	}

	snap, err := e.s.snapshot(context.Background(), &class{ID: 1, Name: "GPU day"})
	if err != nil {
		t.Fatal(err)
	}
	pc := snap.Exercises[1]
	var order []string
	for _, ld := range pc.Leaders {
		order = append(order, ld.Name)
	}
	if !slices.Equal(order, []string{"Ada Lovelace", "Bob", "Farid"}) {
		t.Errorf("peer-copy leaderboard %v", order)
	}
	if pc.Hist == nil || pc.Hist.N != 3 || pc.Passed != 3 || pc.Tried != 4 {
		t.Errorf("peer-copy: hist %+v passed %d tried %d", pc.Hist, pc.Passed, pc.Tried)
	}
}

func TestHistogram(t *testing.T) {
	if newHistogram(nil) != nil {
		t.Fatal("histogram of nothing")
	}
	for _, vals := range [][]float64{{1}, {0.5, 0.62, 0.97, 1.0, 1.31, 1.4}, {0.01, 250}, {3, 3, 3}, {0.999999, 1.000001}} {
		h := newHistogram(vals)
		total := 0
		for i, b := range h.Bars {
			total += b.Count
			if b.X < histLeft || b.X+b.W > histW-histRight+0.1 || b.Y < histTop-0.1 || b.H < 0 {
				t.Errorf("%v: bar %d out of the plot: %+v", vals, i, b)
			}
			if b.Fast != (b.Lo >= 1-1e-9) {
				t.Errorf("%v: bar %d fast=%v with lo %g", vals, i, b.Fast, b.Lo)
			}
		}
		if total != len(vals) || len(h.Bars) > maxBins {
			t.Errorf("%v: %d bars hold %d values", vals, len(h.Bars), total)
		}
		if h.BaselineX < histLeft || h.BaselineX > histW-histRight {
			t.Errorf("%v: baseline at %g is outside the plot", vals, h.BaselineX)
		}
	}
	h := newHistogram([]float64{0.5, 0.62, 0.97, 1.0, 1.31, 1.4})
	var counts []int
	for _, b := range h.Bars {
		counts = append(counts, b.Count)
	}
	// Bins of 0.1 from 0.5: [0.5,0.6) [0.6,0.7) ... [1.4,1.5).
	if want := []int{1, 1, 0, 0, 1, 1, 0, 0, 1, 1}; !slices.Equal(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

// login opens the dashboard with ?token= and returns the session cookie.
func (e *testEnv) login() *http.Cookie {
	e.t.Helper()
	code, _, hdr := e.do("GET", "/?token="+e.class.InstructorToken, "", nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != "/" {
		e.t.Fatalf("?token= login: %d to %q", code, hdr.Get("Location"))
	}
	resp := http.Response{Header: hdr}
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
				e.t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax", c)
			}
			return c
		}
	}
	e.t.Fatal("no session cookie")
	return nil
}

func (e *testEnv) get(path string, ck *http.Cookie) (int, string, http.Header) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
	req.AddCookie(ck)
	resp, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String(), resp.Header
}

func TestDashboardEscapesAndLogin(t *testing.T) {
	e := newEnv(t, Config{})
	l := seedClass(e)
	eve := l["Eve <script>alert(1)</script>"]
	bad := report("module0/devices", "failed", "run", 0)
	bad.Headline = `<img src=x onerror=alert(2)>`
	bad.Code = []api.File{{Name: "main.cu", Content: "</pre><script>alert(3)</script>"}}
	e.post(eve.Token, bad)

	ck := e.login()
	code, page, hdr := e.get("/", ck)
	if code != 200 || !strings.Contains(hdr.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("dashboard: %d %v", code, hdr)
	}
	for _, s := range []string{"Ada Lovelace", "Eve &lt;script&gt;alert(1)&lt;/script&gt;", `id="grid"`, `class="bar`} {
		if !strings.Contains(page, s) {
			t.Errorf("dashboard lacks %q", s)
		}
	}
	if strings.Contains(page, "<script>alert") {
		t.Error("dashboard has a learner's raw <script>")
	}
	_, learnerPage, _ := e.get("/learner/"+eve.Learner, ck)
	for _, raw := range []string{"<script>alert", "<img src=x"} {
		if strings.Contains(learnerPage, raw) {
			t.Errorf("learner page has raw %q", raw)
		}
	}
	if !strings.Contains(learnerPage, "&lt;img src=x onerror=alert(2)&gt;") || !strings.Contains(learnerPage, "&lt;/pre&gt;&lt;script&gt;alert(3)") {
		t.Error("learner page lacks the escaped headline or shared code")
	}
	// The login form takes the token by POST too; a wrong one is refused.
	for tok, want := range map[string]int{e.class.InstructorToken: http.StatusSeeOther, "mgi_nope": http.StatusUnauthorized, eve.Token: http.StatusUnauthorized} {
		req, _ := http.NewRequest("POST", e.ts.URL+"/login", strings.NewReader("token="+tok))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("POST /login: %d, want %d", resp.StatusCode, want)
		}
	}
	// A rotated token logs the old session out.
	if _, err := e.s.RotateToken("GPU day"); err != nil {
		t.Fatal(err)
	}
	if code, _, hdr := e.get("/", ck); code != http.StatusSeeOther || hdr.Get("Location") != "/login" {
		t.Errorf("old session after rotation: %d %q", code, hdr.Get("Location"))
	}
}

func TestExports(t *testing.T) {
	e := newEnv(t, Config{})
	seedClass(e)
	e.join("=HYPERLINK(\"http://evil\")")
	ck := e.login()

	code, body, hdr := e.get("/export/reports.csv", ck)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") || !strings.Contains(hdr.Get("Content-Disposition"), "GPU-day-reports.csv") {
		t.Fatalf("reports.csv: %d %v", code, hdr)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+e.count("submissions") || rows[0][0] != "learner" {
		t.Fatalf("reports.csv has %d rows for %d reports", len(rows), e.count("submissions"))
	}

	_, body, _ = e.get("/export/grid.csv", ck)
	rows, err = csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// 7 learners × 2 exercises.
	if len(rows) != 1+7*2 {
		t.Fatalf("grid.csv: %d rows", len(rows))
	}
	found := false
	for _, r := range rows {
		if strings.HasPrefix(r[1], "'=HYPERLINK") {
			found = true
		}
		if strings.HasPrefix(r[1], "=") {
			t.Errorf("grid.csv cell %q would run as a formula", r[1])
		}
	}
	if !found {
		t.Error("grid.csv lacks the defused formula name")
	}

	_, body, _ = e.get("/export/junit.xml", ck)
	var ju junitSuites
	if err := xml.Unmarshal([]byte(body), &ju); err != nil {
		t.Fatalf("junit.xml: %v\n%s", err, body)
	}
	// Failing cells: Chen peer-copy, Dana devices, Eve devices. Not started: Dana, Eve
	// peer-copy and both of the last learner's.
	if ju.Tests != 14 || ju.Failures != 3 || ju.Skipped != 4 || len(ju.Suites) != 7 {
		t.Fatalf("junit: tests %d failures %d skipped %d suites %d", ju.Tests, ju.Failures, ju.Skipped, len(ju.Suites))
	}
}

func TestEventStream(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.join("Ada")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.class.InstructorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, ct)
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("event stream ended: %v", lines.Err())
		}
		return lines.Text()
	}
	for next() != ": connected" {
	}
	e.post(a.Token, report("module0/devices", "passed", "correctness", 0))
	for {
		line := next()
		if line == "event: update" {
			if data := next(); !strings.HasPrefix(data, "data: {") {
				t.Fatalf("update data %q", data)
			}
			break
		}
	}
	// Ending the server's streams ends this one (graceful shutdown does this).
	e.s.EndStreams()
	for lines.Scan() {
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.join("Ada")
	sub := report("module0/devices", "passed", "performance", 1.5)
	e.post(a.Token, sub)
	e.ts.Close()
	e.s.Close()

	s, err := Open(Config{DB: e.db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var version int
	s.st.r.QueryRow(`SELECT version FROM schema_version`).Scan(&version)
	if version != len(migrations) {
		t.Fatalf("schema version %d, want %d", version, len(migrations))
	}
	l, err := s.learnerByToken(context.Background(), a.Token)
	if err != nil || l.Name != "Ada" {
		t.Fatalf("learner after reopen: %v %v", l, err)
	}
	classes, err := s.Classes()
	if err != nil || len(classes) != 1 || classes[0].Reports != 1 || classes[0].Learners != 1 || classes[0].JoinCode != e.class.JoinCode {
		t.Fatalf("classes after reopen: %+v %v", classes, err)
	}
	if _, err := s.CreateClass("GPU day"); err == nil {
		t.Fatal("a second class of the same name")
	}
	if ok, err := s.integrity(); err != nil || ok != "ok" {
		t.Fatalf("integrity: %q %v", ok, err)
	}
}

// TestEventStreamOutlivesTimeouts: the server's read and write timeouts must not cut the
// dashboard's stream (it would reconnect every 30 s otherwise).
func TestEventStreamOutlivesTimeouts(t *testing.T) {
	saved := connTimeouts
	connTimeouts.read, connTimeouts.write = 500*time.Millisecond, 500*time.Millisecond
	defer func() { connTimeouts = saved }()
	e := newEnv(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()

	req, _ := http.NewRequest("GET", url+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.class.InstructorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(1500 * time.Millisecond) // three times the timeouts
	a := e.join("Ada")
	code, body, err := postJSON(http.DefaultClient, url+api.PathReports, a.Token, report("module0/devices", "passed", "", 0))
	if err != nil || code != http.StatusCreated {
		t.Fatalf("report: %d %s %v", code, body, err)
	}
	for line := range lines {
		if line == "event: update" {
			break
		}
	}
	select {
	case _, open := <-lines:
		if !open {
			t.Fatal("the event stream ended before its update")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no update")
	}
	// Graceful shutdown ends the stream and returns.
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
