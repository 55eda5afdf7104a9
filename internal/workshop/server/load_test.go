package server

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// loadResult is what one simulated class measured.
type loadResult struct {
	latencies []time.Duration // one per report, sorted
	wall      time.Duration
	refreshes int // dashboard /live fetches during the load
}

func (r loadResult) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(q*float64(len(r.latencies))))]
}

// runLoad has learners learners join and post perLearner reports each, all at once, over
// loopback HTTP, while one open dashboard follows the event stream and fetches /live on every
// update, as a browser would.
func runLoad(tb testing.TB, learners, perLearner int) loadResult {
	e := newEnv(tb, Config{TokenRate: -1, IPRate: -1, Now: time.Now})
	tokens := make([]string, learners)
	for i := range tokens {
		tokens[i] = e.join(fmt.Sprintf("learner %02d", i)).Token
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	refreshes := 0
	dash := sync.WaitGroup{}
	dash.Go(func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+e.class.InstructorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "event: update" {
				continue
			}
			r, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/live", nil)
			r.Header.Set("Authorization", "Bearer "+e.class.InstructorToken)
			if lr, err := http.DefaultClient.Do(r); err == nil {
				lr.Body.Close()
				refreshes++
			}
		}
	})

	exercises := []string{"module0/devices", "module0/peer-copy", "module1/allreduce", "module1/ring"}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: learners}, Timeout: 30 * time.Second}
	lat := make([][]time.Duration, learners)
	var wg sync.WaitGroup
	start := time.Now()
	for i, tok := range tokens {
		wg.Go(func() {
			for j := range perLearner {
				verdict, stage, ratio := "failed", "correctness", 0.0
				if j%3 == 2 {
					verdict, stage, ratio = "passed", "performance", 0.6+float64((i*7+j)%10)/10
				}
				sub := report(exercises[(j/3)%len(exercises)], verdict, stage, ratio)
				sub.Figures = []api.Figure{{Name: "busbw", Value: 300, Unit: "GB/s"}, {Name: "time", Value: 1188, Unit: "us"}}
				t0 := time.Now()
				code, body, err := postJSON(client, e.ts.URL+api.PathReports, tok, sub)
				lat[i] = append(lat[i], time.Since(t0))
				if err != nil || code != http.StatusCreated {
					tb.Errorf("report: %d %s %v", code, body, err)
					return
				}
			}
		})
	}
	wg.Wait()
	res := loadResult{wall: time.Since(start)}
	cancel()
	dash.Wait()
	res.refreshes = refreshes
	for _, l := range lat {
		res.latencies = append(res.latencies, l...)
	}
	slices.Sort(res.latencies)
	if n := e.count("submissions"); n != learners*perLearner {
		tb.Fatalf("%d reports stored, want %d", n, learners*perLearner)
	}
	return res
}

// TestLoadSmall is the unit-test size of BenchmarkClass60x20: it checks that concurrent posting
// stores everything and logs the latency, asserting nothing about time.
func TestLoadSmall(t *testing.T) {
	r := runLoad(t, 6, 5)
	t.Logf("6 learners × 5 reports: p50 %v, p95 %v, max %v, wall %v", r.quantile(0.5), r.quantile(0.95), r.latencies[len(r.latencies)-1], r.wall)
}

// BenchmarkClass60x20 is a full class: 60 learners post 20 reports each, all at once, while a
// dashboard follows. Run it with
//
//	go test -run '^$' -bench Class60x20 -benchtime 1x ./internal/workshop/server/
func BenchmarkClass60x20(b *testing.B) {
	var all []time.Duration
	var wall time.Duration
	for b.Loop() {
		r := runLoad(b, 60, 20)
		all = append(all, r.latencies...)
		wall += r.wall
		b.Logf("dashboard refreshes during the load: %d", r.refreshes)
	}
	slices.Sort(all)
	q := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.95), "p95-ms")
	b.ReportMetric(q(1), "max-ms")
	b.ReportMetric(float64(len(all))/wall.Seconds(), "reports/s")
	b.Logf("%d reports: p50 %.1f ms, p95 %.1f ms, max %.1f ms", len(all), q(0.5), q(0.95), q(1))
}
