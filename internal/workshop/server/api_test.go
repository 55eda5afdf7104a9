package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

func TestJoinSubmitMe(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.join("  Ada  ")
	if a.Name != "Ada" || a.Class != "GPU day" || !strings.HasPrefix(a.Token, learnerPrefix) || a.Learner == "" {
		t.Fatalf("join response %+v", a)
	}
	// The join code works in any case and without its dash.
	_, body, _ := e.do("POST", api.PathJoin, "", api.JoinRequest{Code: strings.ToLower(strings.ReplaceAll(e.class.JoinCode, "-", "")), Name: "Ada"})
	var again api.JoinResponse
	json.Unmarshal(body, &again)
	if again.Name != "Ada (2)" || again.Token == a.Token {
		t.Fatalf("second Ada: %s", body)
	}

	sub := report("module0/devices", "passed", "performance", 1.2)
	if r := e.post(a.Token, sub); r.ID != sub.ID || r.Duplicate {
		t.Fatalf("submit: %+v", r)
	}
	code, body, _ := e.do("GET", api.PathMe, a.Token, nil)
	if code != http.StatusOK {
		t.Fatalf("me: %d %s", code, body)
	}
	var me api.MeResponse
	if err := json.Unmarshal(body, &me); err != nil {
		t.Fatal(err)
	}
	if me.Name != "Ada" || me.Class != "GPU day" || len(me.Submissions) != 1 || me.Submissions[0].ID != sub.ID ||
		me.Submissions[0].Verdict != "passed" || me.Submissions[0].Exercise != "module0/devices" {
		t.Fatalf("me: %+v", me)
	}
	// The database holds hashes of tokens, never the tokens.
	raw, err := e.s.st.r.Query(`SELECT token_hash FROM learners UNION ALL SELECT token_hash FROM classes`)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for raw.Next() {
		var h []byte
		raw.Scan(&h)
		if len(h) != 32 || strings.Contains(string(h), "mg") {
			t.Fatalf("stored token hash %x", h)
		}
	}
}

func TestIdempotentResend(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.join("Ada")
	sub := report("module0/devices", "failed", "correctness", 0)
	if r := e.post(a.Token, sub); r.Duplicate {
		t.Fatal("first post marked duplicate")
	}
	changed := sub
	changed.Verdict = "passed" // a resend is the same submission; the first copy stays
	code, body, _ := e.do("POST", api.PathReports, a.Token, changed)
	var r api.SubmitResponse
	json.Unmarshal(body, &r)
	if code != http.StatusOK || !r.Duplicate || r.ID != sub.ID {
		t.Fatalf("resend: %d %s", code, body)
	}
	// Upper-case hex is the same ID.
	upper := sub
	upper.ID = strings.ToUpper(sub.ID)
	if r := e.post(a.Token, upper); !r.Duplicate {
		t.Fatal("upper-case resend stored twice")
	}
	if n := e.count("submissions"); n != 1 {
		t.Fatalf("%d submissions stored, want 1", n)
	}
	// Another learner may use the same ID: IDs are per learner, nobody can block another's.
	b := e.join("Bob")
	if r := e.post(b.Token, sub); r.Duplicate {
		t.Fatal("Bob's submission with Ada's ID was taken for a duplicate")
	}
	st := e.status()
	if got := st.Learners[0].Cells["module0/devices"].State; got != stateFailing {
		t.Fatalf("Ada's cell is %s, want failing (the resend must not replace the first copy)", got)
	}
}

func TestLearnerIsolation(t *testing.T) {
	e := newEnv(t, Config{})
	a, b := e.join("Ada"), e.join("Bob")
	e.post(a.Token, report("module0/devices", "passed", "performance", 1.1))
	bsub := report("module0/peer-copy", "failed", "run", 0)
	bsub.Headline = "Bob's secret headline"
	e.post(b.Token, bsub)

	_, body, _ := e.do("GET", api.PathMe, a.Token, nil)
	if strings.Contains(string(body), "Bob") || strings.Contains(string(body), bsub.ID) || strings.Contains(string(body), "peer-copy") {
		t.Fatalf("Ada's /me shows Bob's data: %s", body)
	}
	for _, path := range []string{"/", "/live", "/events", "/learner/" + b.Learner, api.PathClassStatus,
		"/export/reports.csv", "/export/grid.csv", "/export/junit.xml"} {
		code, body, _ := e.do("GET", path, a.Token, nil)
		if code != http.StatusForbidden {
			t.Errorf("GET %s with a learner token: %d %s, want 403", path, code, body)
		}
		if strings.Contains(string(body), "Bob") {
			t.Errorf("GET %s with a learner token leaks: %s", path, body)
		}
		// The same through the dashboard's cookie.
		req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
		req.AddCookie(&http.Cookie{Name: cookieName, Value: a.Token})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with a learner token as cookie: %d, want 403", path, resp.StatusCode)
		}
		// And with no token at all.
		code, _, hdr := e.do("GET", path, "", nil)
		if path == "/" {
			if code != http.StatusSeeOther || hdr.Get("Location") != "/login" {
				t.Errorf("GET / without a token: %d to %q, want 303 to /login", code, hdr.Get("Location"))
			}
		} else if code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", path, code)
		}
	}
	// A learner token in ?token= does not log in.
	code, body, hdr := e.do("GET", "/?token="+a.Token, "", nil)
	if code != http.StatusUnauthorized || hdr.Get("Set-Cookie") != "" || !strings.Contains(string(body), "learner") {
		t.Errorf("/?token=<learner token>: %d %v", code, hdr)
	}
	// The instructor token posts no reports and reads no /me.
	if code, _, _ := e.do("POST", api.PathReports, e.class.InstructorToken, report("module0/devices", "passed", "", 0)); code != http.StatusUnauthorized {
		t.Errorf("report with the instructor token: %d, want 401", code)
	}
	if code, _, _ := e.do("GET", api.PathMe, e.class.InstructorToken, nil); code != http.StatusUnauthorized {
		t.Errorf("/me with the instructor token: %d, want 401", code)
	}
	// Another class's instructor sees nothing of this one.
	other, err := e.s.CreateClass("Other class")
	if err != nil {
		t.Fatal(err)
	}
	code, body, _ = e.do("GET", api.PathClassStatus, other.InstructorToken, nil)
	if code != http.StatusOK || strings.Contains(string(body), "Ada") {
		t.Errorf("other class status: %d %s", code, body)
	}
	if code, _, _ := e.do("GET", "/learner/"+a.Learner, other.InstructorToken, nil); code != http.StatusNotFound {
		t.Errorf("other class's instructor opens Ada's page: %d, want 404", code)
	}
}

func TestBadRequestsChangeNothing(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.join("Ada")
	e.post(a.Token, report("module0/devices", "failed", "build", 0))
	good := func(edit func(m map[string]any)) string {
		b, _ := json.Marshal(report("module0/devices", "passed", "performance", 1.1))
		var m map[string]any
		json.Unmarshal(b, &m)
		edit(m)
		out, _ := json.Marshal(m)
		return string(out)
	}
	big := good(func(m map[string]any) { m["headline"] = strings.Repeat("x", api.MaxBodyBytes) })
	cases := []struct {
		name  string
		path  string
		token string
		body  string
		want  int
	}{
		{"not JSON", api.PathReports, a.Token, `{"id": `, 400},
		{"empty body", api.PathReports, a.Token, ``, 400},
		{"null", api.PathReports, a.Token, `null`, 400},
		{"array", api.PathReports, a.Token, `[1,2]`, 400},
		{"trailing data", api.PathReports, a.Token, good(func(map[string]any) {}) + `{}`, 400},
		{"wrong type", api.PathReports, a.Token, good(func(m map[string]any) { m["attempt"] = "three" }), 400},
		{"number out of range", api.PathReports, a.Token, strings.Replace(good(func(m map[string]any) {}), `"duration_s":3.5`, `"duration_s":1e999`, 1), 400},
		{"unknown verdict", api.PathReports, a.Token, good(func(m map[string]any) { m["verdict"] = "great" }), 400},
		{"bad exercise", api.PathReports, a.Token, good(func(m map[string]any) { m["exercise"] = "../etc/passwd" }), 400},
		{"exercise without module", api.PathReports, a.Token, good(func(m map[string]any) { m["exercise"] = "devices" }), 400},
		{"bad id", api.PathReports, a.Token, good(func(m map[string]any) { m["id"] = "xyz" }), 400},
		{"bad target", api.PathReports, a.Token, good(func(m map[string]any) { m["target"] = "theirs" }), 400},
		{"bad fault", api.PathReports, a.Token, good(func(m map[string]any) { m["fault"] = "cosmic rays" }), 400},
		{"bad stage", api.PathReports, a.Token, good(func(m map[string]any) { m["stage"] = "<b>" }), 400},
		{"negative attempt", api.PathReports, a.Token, good(func(m map[string]any) { m["attempt"] = -1 }), 400},
		{"negative ratio", api.PathReports, a.Token, good(func(m map[string]any) { m["perf"].(map[string]any)["ratio"] = -2 }), 400},
		{"long headline", api.PathReports, a.Token, good(func(m map[string]any) { m["headline"] = strings.Repeat("é", api.MaxTextRunes+1) }), 400},
		{"too many figures", api.PathReports, a.Token, good(func(m map[string]any) {
			f := make([]map[string]any, api.MaxFigures+1)
			for i := range f {
				f[i] = map[string]any{"name": "x", "value": 1, "unit": "s"}
			}
			m["figures"] = f
		}), 400},
		{"code escaping the workspace", api.PathReports, a.Token, good(func(m map[string]any) {
			m["code"] = []map[string]any{{"name": "../../.ssh/id_rsa", "content": "x"}}
		}), 400},
		{"too much code", api.PathReports, a.Token, good(func(m map[string]any) {
			m["code"] = []map[string]any{{"name": "a.cu", "content": strings.Repeat("x", api.MaxCodeBytes/2+1)}, {"name": "b.cu", "content": strings.Repeat("x", api.MaxCodeBytes/2+1)}}
		}), 400},
		{"oversized", api.PathReports, a.Token, big, 413},
		{"no token", api.PathReports, "", good(func(map[string]any) {}), 401},
		{"wrong token", api.PathReports, learnerPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", good(func(map[string]any) {}), 401},
		{"garbage token", api.PathReports, "hello", good(func(map[string]any) {}), 401},
		{"join bad JSON", api.PathJoin, "", `{"code":`, 400},
		{"join wrong code", api.PathJoin, "", `{"code":"AAAA-AAAA","name":"Eve"}`, 403},
		{"join short code", api.PathJoin, "", `{"code":"AB","name":"Eve"}`, 400},
		{"join empty name", api.PathJoin, "", fmt.Sprintf(`{"code":%q,"name":"  "}`, e.class.JoinCode), 400},
		{"join control char", api.PathJoin, "", fmt.Sprintf(`{"code":%q,"name":"Eve\u0007"}`, e.class.JoinCode), 400},
		{"join long name", api.PathJoin, "", fmt.Sprintf(`{"code":%q,"name":%q}`, e.class.JoinCode, strings.Repeat("n", api.MaxNameRunes+1)), 400},
		{"join oversized", api.PathJoin, "", fmt.Sprintf(`{"code":%q,"name":"Eve","x":%q}`, e.class.JoinCode, strings.Repeat("x", 8<<10)), 413},
		{"GET on reports", api.PathReports, a.Token, "", 405},
		{"unknown API path", "/api/v1/nothing", a.Token, "", 404},
	}
	before := [2]int{e.count("submissions"), e.count("learners")}
	for _, c := range cases {
		method := "POST"
		if c.want == 405 || c.want == 404 {
			method = "GET"
		}
		var body any
		if c.body != "" {
			body = c.body
		}
		code, resp, _ := e.do(method, c.path, c.token, body)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, resp, c.want)
			continue
		}
		var apiErr api.Error
		if err := json.Unmarshal(resp, &apiErr); err != nil || apiErr.Error == "" {
			t.Errorf("%s: body %q is not an api.Error", c.name, resp)
		}
	}
	// An oversized body without Content-Length (chunked) is cut off by the reader: 413 too.
	pr, pw := io.Pipe()
	go func() { io.WriteString(pw, big); pw.Close() }()
	req, _ := http.NewRequest("POST", e.ts.URL+api.PathReports, pr)
	req.Header.Set("Authorization", "Bearer "+a.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked oversized body: %d, want 413", resp.StatusCode)
	}
	// Wrong content type.
	req, _ = http.NewRequest("POST", e.ts.URL+api.PathReports, strings.NewReader(good(func(map[string]any) {})))
	req.Header.Set("Authorization", "Bearer "+a.Token)
	req.Header.Set("Content-Type", "text/plain")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain body: %d, want 415", resp.StatusCode)
	}
	if after := [2]int{e.count("submissions"), e.count("learners")}; after != before {
		t.Fatalf("bad requests changed the database: (submissions, learners) %v -> %v", before, after)
	}
	// The valid base of the bad cases is accepted: the failures above were the edits.
	if code, body, _ := e.do("POST", api.PathReports, a.Token, good(func(map[string]any) {})); code != http.StatusCreated {
		t.Fatalf("valid report: %d %s", code, body)
	}
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, Config{TokenRate: 1e-9, TokenBurst: 3, IPRate: -1})
	a := e.join("Ada")
	for range 3 {
		e.post(a.Token, report("module0/devices", "failed", "build", 0))
	}
	before := e.count("submissions")
	code, body, hdr := e.do("POST", api.PathReports, a.Token, report("module0/devices", "failed", "build", 0))
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Fatalf("4th report: %d %s (Retry-After %q), want 429", code, body, hdr.Get("Retry-After"))
	}
	if e.count("submissions") != before {
		t.Fatal("a rate-limited report was stored")
	}
	// Another learner has a bucket of their own.
	b := e.join("Bob")
	e.post(b.Token, report("module0/devices", "passed", "", 0))

	// Per address: every request counts, tokens or not.
	e2 := newEnv(t, Config{IPRate: 1e-9, IPBurst: 5, TokenRate: -1})
	for range 5 {
		if code, _, _ := e2.do("GET", "/healthz", "", nil); code != http.StatusOK {
			t.Fatalf("healthz: %d", code)
		}
	}
	if code, _, _ := e2.do("POST", api.PathJoin, "", api.JoinRequest{Code: e2.class.JoinCode, Name: "Eve"}); code != http.StatusTooManyRequests {
		t.Fatalf("6th request from one address: %d, want 429", code)
	}
	if e2.count("learners") != 0 {
		t.Fatal("a rate-limited join was stored")
	}
	// The bucket refills with time.
	e3 := newEnv(t, Config{IPRate: 1, IPBurst: 1, TokenRate: -1})
	e3.do("GET", "/healthz", "", nil)
	if code, _, _ := e3.do("GET", "/healthz", "", nil); code != http.StatusTooManyRequests {
		t.Fatalf("second request at once: %d, want 429", code)
	}
	e3.clock.Advance(1500 * time.Millisecond)
	if code, _, _ := e3.do("GET", "/healthz", "", nil); code != http.StatusOK {
		t.Fatalf("after 1.5 s: %d, want 200", code)
	}
}

func TestMethodAndSizeOnEveryRoute(t *testing.T) {
	e := newEnv(t, Config{})
	for _, path := range []string{"/", "/live", "/events", "/export/junit.xml", api.PathMe, api.PathClassStatus, "/healthz", "/static/dashboard.css"} {
		if code, _, hdr := e.do("DELETE", path, e.class.InstructorToken, nil); code != http.StatusMethodNotAllowed || hdr.Get("Allow") == "" {
			t.Errorf("DELETE %s: %d, want 405 with Allow", path, code)
		}
		req, _ := http.NewRequest("GET", e.ts.URL+path, strings.NewReader(strings.Repeat("x", 100)))
		req.Header.Set("Authorization", "Bearer "+e.class.InstructorToken)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("GET %s with a body: %d, want 413", path, resp.StatusCode)
		}
	}
}
