package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// childEnv makes the test binary a class server (see TestMain): it serves the database named
// by the variable on a loopback port and prints "listening ADDR".
const childEnv = "MGPU_WORKSHOP_TEST_SERVE_DB"

func TestMain(m *testing.M) {
	if db := os.Getenv(childEnv); db != "" {
		os.Exit(serveChild(db))
	}
	os.Exit(m.Run())
}

func serveChild(db string) int {
	s, err := Open(Config{DB: db, TokenRate: -1, IPRate: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("listening %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := s.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is a class server in another process.
type child struct {
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
}

func startChild(t *testing.T, db string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+db)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child server: %q %v\n%s", line, err, c.stderr)
	}
	c.url = "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	return c
}

func postJSON(client *http.Client, url, token string, v any) (int, []byte, error) {
	b, _ := json.Marshal(v)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// TestKill9LosesNothing posts reports from several learners at once, kills the server with
// SIGKILL in the middle, restarts it on the same file and checks that every report that was
// acknowledged (2xx) is there and the database is intact. Two rounds.
func TestKill9LosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	db := filepath.Join(t.TempDir(), "class.db")
	s, err := Open(Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	class, err := s.CreateClass("crash")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	const learners = 8
	client := &http.Client{Timeout: 10 * time.Second}
	acked := map[string][]string{} // learner token → acknowledged report IDs
	var tokens []string
	for round := range 2 {
		c := startChild(t, db)
		if round == 0 {
			for i := range learners {
				code, body, err := postJSON(client, c.url+api.PathJoin, "", api.JoinRequest{Code: class.JoinCode, Name: fmt.Sprintf("learner %d", i)})
				if err != nil || code != http.StatusCreated {
					t.Fatalf("join: %d %s %v", code, body, err)
				}
				var jr api.JoinResponse
				json.Unmarshal(body, &jr)
				tokens = append(tokens, jr.Token)
			}
		}
		var mu sync.Mutex
		total := 0
		enough := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		for _, tok := range tokens {
			wg.Go(func() {
				for {
					sub := report("module0/devices", "failed", "correctness", 0)
					sub.Headline = strings.Repeat("h", 2000) // bigger pages, longer writes
					code, _, err := postJSON(client, c.url+api.PathReports, tok, sub)
					if err != nil {
						return // the server is gone
					}
					if code/100 != 2 {
						t.Errorf("report: HTTP %d", code)
						return
					}
					mu.Lock()
					acked[tok] = append(acked[tok], sub.ID)
					total++
					if total >= 300 {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
				}
			})
		}
		select {
		case <-enough:
		case <-time.After(60 * time.Second):
			t.Log("fewer than 300 reports in 60 s; killing anyway")
		}
		c.cmd.Process.Kill() // SIGKILL, mid-load
		c.cmd.Wait()
		wg.Wait()
		t.Logf("round %d: %d reports acknowledged before SIGKILL", round, total)
	}

	c := startChild(t, db)
	for _, tok := range tokens {
		req, _ := http.NewRequest("GET", c.url+api.PathMe, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var me api.MeResponse
		err = json.NewDecoder(resp.Body).Decode(&me)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, s := range me.Submissions {
			have[s.ID] = true
		}
		for _, id := range acked[tok] {
			if !have[id] {
				t.Errorf("%s: acknowledged report %s is lost", me.Name, id)
			}
		}
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("server after SIGTERM: %v\n%s", err, c.stderr)
	}
	s, err = Open(Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res, err := s.integrity(); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
}
