package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
	"github.com/mgpu-learn/mgpu-learn/internal/workshop/client"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

const workshopTestToken = "lt_cli-SECRET-77aa"

// classFake is a class server in memory for the command tests.
type classFake struct {
	mu     sync.Mutex
	stored map[string]api.Submission
	srv    *httptest.Server
}

func newClassFake(t *testing.T) *classFake {
	f := &classFake{stored: map[string]api.Submission{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathJoin, func(w http.ResponseWriter, r *http.Request) {
		var jr api.JoinRequest
		json.NewDecoder(r.Body).Decode(&jr)
		if jr.Code != "K7QM-2XPA" {
			w.WriteHeader(403)
			json.NewEncoder(w).Encode(api.Error{Error: "unknown join code"})
			return
		}
		json.NewEncoder(w).Encode(api.JoinResponse{Class: "gpu-101", Learner: "l1", Name: jr.Name, Token: workshopTestToken})
	})
	mux.HandleFunc("POST "+api.PathReports, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != api.HeaderAuthPrefix+workshopTestToken {
			w.WriteHeader(401)
			return
		}
		var s api.Submission
		if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
			w.WriteHeader(400)
			return
		}
		f.mu.Lock()
		_, dup := f.stored[s.ID]
		f.stored[s.ID] = s
		f.mu.Unlock()
		json.NewEncoder(w).Encode(api.SubmitResponse{ID: s.ID, Duplicate: dup})
	})
	mux.HandleFunc("GET "+api.PathMe, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		me := api.MeResponse{Class: "gpu-101", Name: "Ada"}
		for _, s := range f.stored {
			me.Submissions = append(me.Submissions, api.MySubmitted{ID: s.ID, Exercise: s.Exercise, Verdict: s.Verdict, Stage: s.Stage, Received: time.Now()})
		}
		json.NewEncoder(w).Encode(me)
	})
	mux.HandleFunc("GET "+api.PathClassStatus, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != api.HeaderAuthPrefix+"it_teacher" {
			w.WriteHeader(401)
			json.NewEncoder(w).Encode(api.Error{Error: "not the instructor"})
			return
		}
		json.NewEncoder(w).Encode(api.ClassStatus{Class: "gpu-101", Exercises: []string{"module0/sum", "module0/timing"},
			Learners: []api.LearnerRow{{Name: "Ada", Cells: map[string]api.LearnerCell{"module0/sum": {State: "failing", Attempts: 3}}}},
			Stuck:    []api.StuckReport{{Name: "Ada", Exercise: "module0/sum", Reason: "3 failed attempts at correctness"}}})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *classFake) submissions() []api.Submission {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.Submission
	for _, s := range f.stored {
		out = append(out, s)
	}
	return out
}

// mgpu runs the command line in-process and returns its exit code and output.
func mgpu(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errw bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errw)
	if strings.Contains(out.String()+errw.String(), workshopTestToken) {
		t.Errorf("mgpu-learn %v printed the learner's token:\n%s%s", args, out.String(), errw.String())
	}
	return code, out.String(), errw.String()
}

// workshopEnv makes a workspace of the fixture course and isolates the caches; it returns
// the flags that select both.
func workshopEnv(t *testing.T) (ws string, flags []string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv("MGPU_LEARN_CACHE", filepath.Join(dir, "cache"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "xdg"))
	t.Setenv("NO_COLOR", "1")
	t.Setenv(envWorkshopToken, "")
	t.Setenv(envWorkshopURL, "")
	t.Setenv(envWorkshopSend, "")
	t.Setenv("SLURM_JOB_ID", "")
	ws = filepath.Join(dir, "ws")
	flags = []string{"--course", filepath.Join(root, "testdata", "fixture-course"), "--workspace", ws}
	if code, _, e := mgpu(t, append([]string{"init", ws}, flags[:2]...)...); code != 0 {
		t.Fatalf("init: %d %s", code, e)
	}
	return ws, flags
}

// countingHTTP makes the workshop's HTTP clients count their dials.
func countingHTTP(t *testing.T) *atomic.Int32 {
	var n atomic.Int32
	old := workshopHTTP
	workshopHTTP = func() *http.Client {
		hc := client.DefaultHTTP()
		hc.Transport = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			n.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		return hc
	}
	t.Cleanup(func() { workshopHTTP = old })
	return &n
}

// recordStarts replaces the background sender with a counter.
func recordStarts(t *testing.T) *atomic.Int32 {
	var n atomic.Int32
	old := startSender
	startSender = func(*workspace.Workspace, *client.Client) error { n.Add(1); return nil }
	t.Cleanup(func() { startSender = old })
	return &n
}

func queued(t *testing.T, ws string) []client.Item {
	t.Helper()
	l, err := client.New(filepath.Join(ws, workspace.StateDir, "workshop")).Local()
	if err != nil {
		t.Fatal(err)
	}
	return l.Queued
}

func TestWorkshopCheckQueuesWithoutNetwork(t *testing.T) {
	ws, flags := workshopEnv(t)
	f := newClassFake(t)
	dials := countingHTTP(t)
	starts := recordStarts(t)
	with := func(args ...string) []string { return append(args, flags...) }

	if code, out, e := mgpu(t, with("workshop", "join", f.srv.URL, "K7QM-2XPA", "--name", "Ada")...); code != 0 || !strings.Contains(out, `Joined class "gpu-101"`) || !strings.Contains(e, "not https") {
		t.Fatalf("join: %d %s %s", code, out, e)
	}
	joinDials := dials.Load()

	// The starter fails; its report is queued and the sender started, with no network I/O.
	code, _, e := mgpu(t, with("check", "module0/sum")...)
	if code != 1 {
		t.Fatalf("check: exit %d\n%s", code, e)
	}
	if dials.Load() != joinDials {
		t.Errorf("check dialed the class server")
	}
	if starts.Load() != 1 || !strings.Contains(e, `Class "gpu-101": report queued`) {
		t.Errorf("sender started %d times; stderr:\n%s", starts.Load(), e)
	}
	q := queued(t, ws)
	if len(q) != 1 {
		t.Fatalf("%d queued", len(q))
	}
	s := q[0].Submission
	if s.Exercise != "module0/sum" || s.Target != "yours" || s.Verdict != "failed" || s.Stage == "" || s.Fault != "you" || s.Attempt != 1 || len(s.Code) != 0 || s.Version != Version || !client.ValidID(s.ID) {
		t.Errorf("queued %+v", s)
	}

	// --share-code sends the learner's files with that report only.
	if code, _, e = mgpu(t, with("check", "module0/sum", "--share-code")...); code != 1 || !strings.Contains(e, "your code") {
		t.Fatalf("check --share-code: %d\n%s", code, e)
	}
	q = queued(t, ws)
	if len(q) != 2 || q[1].Submission.Attempt != 2 || len(q[1].Submission.Code) == 0 {
		t.Fatalf("queued after --share-code: %+v", q)
	}
	for _, file := range q[1].Submission.Code {
		want, err := os.ReadFile(filepath.Join(ws, "module0-fixtures", "sum", file.Name))
		if err != nil || string(want) != file.Content {
			t.Errorf("shared %s: %v (content differs: %v)", file.Name, err, string(want) != file.Content)
		}
	}
	// The solution and variants are not the learner's: nothing is posted.
	if code, _, _ = mgpu(t, with("check", "module0/sum", "--solution")...); code != 0 {
		t.Errorf("check --solution: %d", code)
	}
	if n := len(queued(t, ws)); n != 2 {
		t.Errorf("check --solution queued a report (%d queued)", n)
	}
	if dials.Load() != joinDials {
		t.Errorf("checks dialed the class server")
	}

	// The learner pushes the queue by hand.
	code, out, e := mgpu(t, with("workshop", "flush")...)
	if code != 0 || !strings.Contains(out, "Sent 2 report(s)") {
		t.Fatalf("flush: %d %s %s", code, out, e)
	}
	if n := len(f.submissions()); n != 2 || len(queued(t, ws)) != 0 {
		t.Errorf("server holds %d, %d queued", n, len(queued(t, ws)))
	}
	code, out, e = mgpu(t, with("workshop", "status")...)
	if code != 0 || !strings.Contains(out, "2 sent, 0 queued, 0 rejected") || !strings.Contains(out, "holds 2 of your reports") {
		t.Errorf("status: %d\n%s%s", code, out, e)
	}
	code, out, _ = mgpu(t, with("workshop", "status", "--json")...)
	var js struct {
		Class string
		Sent  []client.Sent
	}
	if code != 0 || json.Unmarshal([]byte(out), &js) != nil || js.Class != "gpu-101" || len(js.Sent) != 2 {
		t.Errorf("status --json: %d %s", code, out)
	}

	// Server gone: leave refuses to drop the queued report, --discard drops it.
	mgpu(t, with("check", "module0/sum")...)
	f.srv.Close()
	code, _, e = mgpu(t, with("workshop", "flush")...)
	if code != ExitRunner || !strings.Contains(e, "1 report(s) stay queued") || !strings.Contains(e, "connection refused") || strings.Contains(e, "problem in mgpu-learn") {
		t.Errorf("flush with an unreachable server: %d %s", code, e)
	}
	code, _, e = mgpu(t, with("workshop", "leave")...)
	if code != ExitUsage || !strings.Contains(e, "not sent yet") || !strings.Contains(e, "--discard") {
		t.Errorf("leave with an unreachable server: %d %s", code, e)
	}
	code, out, _ = mgpu(t, with("workshop", "leave", "--discard")...)
	if code != 0 || !strings.Contains(out, "Left class") || !strings.Contains(out, "Dropped 1") {
		t.Errorf("leave --discard: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(ws, workspace.StateDir, "workshop")); !os.IsNotExist(err) {
		t.Errorf("the class's folder is still there: %v", err)
	}
	// No class: a check adds nothing.
	before := starts.Load()
	mgpu(t, with("check", "module0/sum")...)
	if _, err := os.Stat(filepath.Join(ws, workspace.StateDir, "workshop")); !os.IsNotExist(err) || starts.Load() != before {
		t.Errorf("a check without a class made %v / started a sender", err)
	}
}

func TestWorkshopCheckWithoutClassOrWithBadConfig(t *testing.T) {
	ws, flags := workshopEnv(t)
	starts := recordStarts(t)
	dials := countingHTTP(t)
	code, _, e := mgpu(t, append([]string{"check", "module0/sum", "--share-code"}, flags...)...)
	if code != 1 || starts.Load() != 0 || dials.Load() != 0 || !strings.Contains(e, "joined no class") {
		t.Errorf("no class: exit %d, %d starts, %d dials\n%s", code, starts.Load(), dials.Load(), e)
	}
	if _, err := os.Stat(filepath.Join(ws, workspace.StateDir, "workshop")); !os.IsNotExist(err) {
		t.Errorf("a check without a class made the workshop folder: %v", err)
	}
	// A corrupt config: the check still reports its own verdict and warns, naming the file.
	cfg := filepath.Join(ws, workspace.StateDir, "workshop", "config.json")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	os.WriteFile(cfg, []byte(`{"schema": 1, "url": "http://x", "tok`), 0o600)
	code, _, e = mgpu(t, append([]string{"check", "module0/sum"}, flags...)...)
	if code != 1 || !strings.Contains(e, "warning: "+cfg) || starts.Load() != 0 {
		t.Errorf("corrupt config: exit %d\n%s", code, e)
	}
	code, _, e = mgpu(t, append([]string{"workshop", "status"}, flags...)...)
	if code != ExitUsage || !strings.Contains(e, cfg) {
		t.Errorf("status with a corrupt config: %d %s", code, e)
	}
}

func TestWorkshopJoinRefusedAndInstructorStatus(t *testing.T) {
	_, flags := workshopEnv(t)
	f := newClassFake(t)
	code, _, e := mgpu(t, append([]string{"workshop", "join", f.srv.URL, "WRONG"}, flags...)...)
	if code != ExitUsage || !strings.Contains(e, "unknown join code") {
		t.Errorf("join with a wrong code: %d %s", code, e)
	}
	code, out, e := mgpu(t, "workshop", "status", "--url", f.srv.URL, "--token", "it_teacher")
	if code != 0 || !strings.Contains(out, `Class "gpu-101": 1 learners, 2 exercises, 1 stuck`) || !strings.Contains(out, "✗3") || !strings.Contains(out, "0a module0/sum") {
		t.Errorf("instructor status: %d\n%s%s", code, out, e)
	}
	t.Setenv(envWorkshopToken, "it_wrong")
	t.Setenv(envWorkshopURL, f.srv.URL)
	if code, _, e = mgpu(t, "workshop", "status"); code != ExitUsage || !strings.Contains(e, "refused the instructor token") || strings.Contains(e, "it_wrong") {
		t.Errorf("wrong instructor token: %d %s", code, e)
	}
}

// The real detached sender: this test binary re-executed as mgpu-learn (TestMain dispatches on
// the program name), in its own session, sends the check's report on its own.
func TestWorkshopBackgroundSenderDelivers(t *testing.T) {
	ws, flags := workshopEnv(t)
	f := newClassFake(t)
	if code, _, e := mgpu(t, append([]string{"workshop", "join", f.srv.URL, "K7QM-2XPA", "--name", "Ada"}, flags...)...); code != 0 {
		t.Fatalf("join: %s", e)
	}
	if code, _, e := mgpu(t, append([]string{"check", "module0/sum"}, flags...)...); code != 1 {
		t.Fatalf("check: %d %s", code, e)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(f.submissions()) == 0 {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(ws, workspace.StateDir, "workshop", client.LogName))
			t.Fatalf("the background sender delivered nothing; its log:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// It leaves once the queue is empty.
	c := client.New(filepath.Join(ws, workspace.StateDir, "workshop"))
	for c.SenderRunning() {
		if time.Now().After(deadline) {
			t.Fatal("the background sender is still running")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := f.submissions()[0]; s.Exercise != "module0/sum" || c.Pending() != 0 {
		t.Errorf("delivered %+v, %d pending", s, c.Pending())
	}
}
