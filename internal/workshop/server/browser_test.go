package server

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// screenshotEnv names where TestDashboardInBrowser also writes the dashboard's screenshot
// (scripts/dashboard-screenshot.sh sets it to docs/workshop-dashboard.png).
const screenshotEnv = "MGPU_WORKSHOP_SCREENSHOT"

const hostileName = "Eve <script>alert(1)</script>"

// seedWorkshop fills a class like the middle of a workshop morning on module 0. With hostile,
// one learner's name is an HTML injection attempt. Returns the learners by name.
func seedWorkshop(e *testEnv, hostile bool) map[string]api.JoinResponse {
	eve := "Eve Moreau"
	if hostile {
		eve = hostileName
	}
	names := []string{"Ada Lovelace", "Bob Martin", "Chen Wei", "Dana Okafor", eve, "Farid Haddad", "Grace Hopper", "Hiro Tanaka", "Ines Duarte", "Jonas Berg"}
	l := map[string]api.JoinResponse{}
	for _, n := range names {
		l[n] = e.join(n)
	}
	type step struct {
		who, ex, verdict, stage string
		ratio                   float64
	}
	const (
		dev = "module0/devices"
		pc  = "module0/peer-copy"
		tm  = "module0/timing"
		bw  = "module0/bandwidth-matrix"
		ab  = "module0/alpha-beta"
	)
	steps := []step{
		{eve, dev, "failed", "build", 0},
		{"Dana Okafor", dev, "failed", "build", 0},
		{"Ada Lovelace", dev, "passed", "correctness", 0},
		{"Farid Haddad", dev, "passed", "correctness", 0},
		{"Chen Wei", dev, "passed", "correctness", 0},
		{"Dana Okafor", dev, "failed", "run", 0},
		{"Bob Martin", dev, "passed", "correctness", 0},
		{"Grace Hopper", dev, "passed", "correctness", 0},
		{"Hiro Tanaka", dev, "passed", "correctness", 0},
		{"Ines Duarte", dev, "passed", "correctness", 0},
		{"Chen Wei", pc, "failed", "correctness", 0},
		{"Ada Lovelace", pc, "failed", "performance", 0.81},
		{"Farid Haddad", pc, "passed", "performance", 1.31},
		{"Dana Okafor", dev, "failed", "build", 0},
		{"Hiro Tanaka", pc, "failed", "performance", 0.66},
		{"Ada Lovelace", pc, "passed", "performance", 1.24},
		{"Chen Wei", pc, "failed", "correctness", 0},
		{"Bob Martin", pc, "passed", "performance", 0.98},
		{"Grace Hopper", pc, "passed", "performance", 1.09},
		{"Dana Okafor", dev, "failed", "run", 0},
		{"Ines Duarte", pc, "passed", "performance", 1.17},
		{"Hiro Tanaka", pc, "failed", "performance", 0.71},
		{"Farid Haddad", tm, "passed", "performance", 1.18},
		{"Chen Wei", pc, "failed", "correctness", 0},
		{"Ada Lovelace", tm, "passed", "performance", 1.05},
		{"Dana Okafor", dev, "failed", "correctness", 0},
		{"Bob Martin", tm, "failed", "build", 0},
		{"Hiro Tanaka", pc, "passed", "performance", 0.93},
		{"Farid Haddad", bw, "passed", "performance", 1.02},
		{"Bob Martin", tm, "failed", "run", 0},
		{"Dana Okafor", dev, "failed", "performance", 0.55},
		{"Ada Lovelace", bw, "failed", "correctness", 0},
		{"Bob Martin", tm, "passed", "performance", 0.97},
		{"Grace Hopper", tm, "failed", "performance", 0.74},
		{"Ada Lovelace", bw, "passed", "performance", 1.12},
		{"Farid Haddad", ab, "failed", "correctness", 0},
	}
	for _, s := range steps {
		e.post(l[s.who].Token, report(s.ex, s.verdict, s.stage, s.ratio))
		e.clock.Advance(40 * time.Second)
	}
	e.clock.Advance(2 * time.Minute)
	return l
}

// chromium runs headless chromium with args and the URL; it returns stdout.
func chromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

// TestDashboardInBrowser opens the dashboard of a seeded class in headless chromium and checks
// what the page shows after the browser parsed it: names (escaped), grid cells, the stuck list,
// the histogram bars and the leaderboard's order. It takes a screenshot too.
func TestDashboardInBrowser(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH (CI installs Debian's chromium; scripts/install-ci-deps.sh): the dashboard is not checked in a browser here")
	}
	e := newEnv(t, Config{Exercises: []string{"module0/devices", "module0/peer-copy", "module0/timing", "module0/bandwidth-matrix", "module0/alpha-beta"}})
	l := seedWorkshop(e, true)
	url := e.ts.URL + "/?token=" + e.class.InstructorToken
	dom := string(chromium(t, bin, "--dump-dom", url))

	if !strings.Contains(dom, `id="grid"`) {
		t.Fatalf("no grid in the page the browser shows:\n%s", dom)
	}
	for name := range l {
		want := strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(name)
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks learner %q", name)
		}
	}
	if strings.Contains(dom, "<script>alert") {
		t.Error("a learner's name became a script element")
	}
	// The page's script ran (under the Content-Security-Policy) and opened the event stream.
	if !regexp.MustCompile(`id="conn" class="conn (wait|on)"`).MatchString(dom) {
		t.Error("the page's script did not run: the connection indicator still says 'static'")
	}

	// Grid cells, by learner row and exercise.
	cellRe := regexp.MustCompile(`data-exercise="([^"]+)" data-state="([^"]+)"`)
	rowOf := func(id string) map[string]string {
		m := regexp.MustCompile(`(?s)<tr data-learner="` + id + `"[^>]*>(.*?)</tr>`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("no grid row for learner %s", id)
		}
		cells := map[string]string{}
		for _, c := range cellRe.FindAllStringSubmatch(m[1], -1) {
			cells[c[1]] = c[2]
		}
		return cells
	}
	for who, want := range map[string]map[string]string{
		"Ada Lovelace": {"module0/devices": "passed", "module0/peer-copy": "passed", "module0/timing": "passed", "module0/bandwidth-matrix": "passed", "module0/alpha-beta": "not-started"},
		"Chen Wei":     {"module0/devices": "passed", "module0/peer-copy": "failing", "module0/timing": "not-started"},
		"Dana Okafor":  {"module0/devices": "failing", "module0/peer-copy": "not-started"},
		"Jonas Berg":   {"module0/devices": "not-started", "module0/alpha-beta": "not-started"},
		"Farid Haddad": {"module0/alpha-beta": "failing", "module0/bandwidth-matrix": "passed"},
	} {
		got := rowOf(l[who].Learner)
		if len(got) != 5 {
			t.Errorf("%s: %d cells, want 5", who, len(got))
		}
		for ex, state := range want {
			if got[ex] != state {
				t.Errorf("%s × %s shows %q, want %q", who, ex, got[ex], state)
			}
		}
	}

	// The stuck list: Chen (same stage), Dana (attempts), Eve (time).
	stuck := regexp.MustCompile(`(?s)<section id="stuck"[^>]*>(.*?)</section>`).FindStringSubmatch(dom)
	if stuck == nil {
		t.Fatal("no stuck section")
	}
	var stuckIDs []string
	for _, m := range regexp.MustCompile(`<li data-learner="([^"]+)"`).FindAllStringSubmatch(stuck[1], -1) {
		stuckIDs = append(stuckIDs, m[1])
	}
	wantStuck := []string{l["Chen Wei"].Learner, l["Dana Okafor"].Learner, l[hostileName].Learner}
	if !slices.Equal(stuckIDs, wantStuck) {
		t.Errorf("stuck list %v, want Chen, Dana, Eve %v", stuckIDs, wantStuck)
	}
	for _, why := range []string{"failed at correctness 3 times in a row", "6 failed attempts", "no progress for 26 min"} {
		if !strings.Contains(stuck[1], why) {
			t.Errorf("stuck list lacks %q", why)
		}
	}

	// The peer-copy card: its histogram holds the 7 learners' best ratios, its leaderboard
	// ranks the passing ones.
	card := regexp.MustCompile(`(?s)<article class="card" data-exercise="module0/peer-copy">(.*?)</article>`).FindStringSubmatch(dom)
	if card == nil {
		t.Fatal("no peer-copy card")
	}
	bars := regexp.MustCompile(`<rect class="bar (fast|slow)"[^>]*data-lo="([0-9.]+)"[^>]*data-count="([0-9]+)"`).FindAllStringSubmatch(card[1], -1)
	total, slow := 0, 0
	for _, b := range bars {
		n, _ := strconv.Atoi(b[3])
		total += n
		if b[1] == "slow" {
			slow += n
		}
	}
	// Best measured: Ada 1.24, Farid 1.31, Hiro 0.93, Bob 0.98, Grace 1.09, Ines 1.17, and
	// Chen none (failed before performance): 6 values, 2 below the baseline.
	if len(bars) == 0 || total != 6 || slow != 2 {
		t.Errorf("peer-copy histogram: %d bars holding %d values (%d slow), want 6 values, 2 slow", len(bars), total, slow)
	}
	var board []string
	for _, m := range regexp.MustCompile(`<li data-learner="([^"]+)"><span class="rank">[0-9]+</span><span class="who">[^<]*</span> <span class="ratio">([^<]+)</span>`).FindAllStringSubmatch(card[1], -1) {
		board = append(board, m[1]+" "+m[2])
	}
	wantBoard := []string{l["Farid Haddad"].Learner + " 1.31×", l["Ada Lovelace"].Learner + " 1.24×", l["Ines Duarte"].Learner + " 1.17×",
		l["Grace Hopper"].Learner + " 1.09×", l["Bob Martin"].Learner + " 0.98×"}
	if !slices.Equal(board, wantBoard) {
		t.Errorf("peer-copy leaderboard %v, want %v", board, wantBoard)
	}

	// A screenshot of the whole page.
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if out := os.Getenv(screenshotEnv); out != "" {
		// The docs' picture: the same morning without the hostile name.
		e2 := newEnv(t, Config{Exercises: []string{"module0/devices", "module0/peer-copy", "module0/timing", "module0/bandwidth-matrix", "module0/alpha-beta"}})
		e2.s.st.w.Exec(`UPDATE classes SET name = 'GPU day · March 10'`)
		seedWorkshop(e2, false)
		url = e2.ts.URL + "/?token=" + e2.class.InstructorToken
		shot = out
	}
	chromium(t, bin, "--window-size=1400,1000", "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 1000 {
		t.Errorf("screenshot is %v, want 1400×1000", b)
	}
	t.Logf("screenshot: %s", shot)
}
