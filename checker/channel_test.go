package checker

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// harnessConn is a test's stand-in for a rank's harness on the records channel.
type harnessConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	key  []byte
	seed uint64
	seq  int
}

func channelAddr(t *testing.T, s launch.Spec) string {
	t.Helper()
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "MGPU_RECORDS=unix:"); ok {
			return v
		}
	}
	t.Fatal("the spec has no MGPU_RECORDS")
	return ""
}

// dialHarness connects and says hello as rank with pid; the reply is returned as is when it is
// not "ok".
func dialHarness(t *testing.T, addr string, rank, pid int) (*harnessConn, string) {
	t.Helper()
	conn, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &harnessConn{t: t, conn: conn, br: bufio.NewReader(conn)}
	fmt.Fprintf(conn, "hello %d %d c/1\n", rank, pid)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := h.br.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, "read: " + err.Error()
	}
	f := strings.Fields(line)
	split := len(f) == 5 && f[2] == "split" // a split rank: its input keys, no seed
	if (len(f) != 3 && !split) || f[0] != "ok" {
		conn.Close()
		return nil, line
	}
	h.key, err = hex.DecodeString(f[1])
	if err != nil || len(h.key) != 32 {
		t.Fatalf("bad key in %q", line)
	}
	if !split {
		h.seed, err = strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			t.Fatalf("bad seed in %q", line)
		}
	}
	return h, ""
}

func (h *harnessConn) sign(seq int, body string) string {
	m := hmac.New(sha256.New, h.key)
	fmt.Fprintf(m, "%d %s", seq, body)
	return hex.EncodeToString(m.Sum(nil))
}

// send writes each complete line signed; a last line without its newline is written raw (a
// rank that died while writing).
func (h *harnessConn) send(records string) {
	for records != "" {
		line, rest, ok := strings.Cut(records, "\n")
		if !ok {
			fmt.Fprint(h.conn, line)
			break
		}
		records = rest
		if strings.TrimSpace(line) == "" {
			continue
		}
		h.seq++
		fmt.Fprintf(h.conn, "%s %s\n", h.sign(h.seq, line), line)
	}
}

func (h *harnessConn) close() { h.conn.Close() }

// sendRecords is what a rank's harness does: hello, then every record signed.
func sendRecords(t *testing.T, s launch.Spec, rank int, records string) {
	t.Helper()
	h, why := dialHarness(t, channelAddr(t, s), rank, os.Getpid())
	if h == nil {
		t.Fatalf("rank %d refused: %s", rank, why)
	}
	h.send(records)
	h.close()
}

// summarize is the done record's summary of records.
func summarize(t *testing.T, records string) string {
	var s doneSummary
	for _, line := range strings.Split(records, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			continue
		}
		s.Records++
		switch r.T {
		case "case":
			s.Cases++
			s.Checked += r.Checked
		case "timing":
			s.TimingSamples += int64(len(r.US))
		}
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func startServer(t *testing.T, nranks int) *recordServer {
	t.Helper()
	s, err := newRecordServer(nranks, 42, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.finish(time.Second) })
	return s
}

func serverAddr(s *recordServer) string { return strings.TrimPrefix(s.Env(), "MGPU_RECORDS=unix:") }

func TestChannelKeepsSignedRecordsInOrder(t *testing.T) {
	s := startServer(t, 2)
	h, why := dialHarness(t, serverAddr(s), 1, os.Getpid())
	if h == nil {
		t.Fatal(why)
	}
	if h.seed != 42 {
		t.Fatalf("seed %d, want 42", h.seed)
	}
	h.send("{\"t\":\"start\",\"rank\":1}\n{\"t\":\"done\",\"rank\":1}\n")
	h.close()
	chans, _, intr := s.finish(2 * time.Second)
	if len(intr) != 0 {
		t.Fatalf("intrusions: %v", intr)
	}
	c := chans[1]
	if c == nil || c.Forged != "" || c.PID != os.Getpid() {
		t.Fatalf("rank 1: %+v", c)
	}
	if got := string(c.Records()); got != "{\"t\":\"start\",\"rank\":1}\n{\"t\":\"done\",\"rank\":1}\n" {
		t.Fatalf("records %q", got)
	}
}

func TestChannelRejectsForgeries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(h *harnessConn)
		want  string
	}{
		{"unsigned", func(h *harnessConn) { fmt.Fprint(h.conn, "{\"t\":\"done\",\"rank\":0}\n") }, "not signed"},
		{"wrong key", func(h *harnessConn) {
			h.key = bytes.Repeat([]byte{7}, 32)
			h.send("{\"t\":\"done\",\"rank\":0}\n")
		}, "not signed with this run's key"},
		{"replayed", func(h *harnessConn) {
			body := "{\"t\":\"start\",\"rank\":0}"
			sig := h.sign(1, body)
			fmt.Fprintf(h.conn, "%s %s\n%s %s\n", sig, body, sig, body)
		}, "record 2 is not signed with this run's key"},
		{"skipped", func(h *harnessConn) {
			body := "{\"t\":\"done\",\"rank\":0}"
			fmt.Fprintf(h.conn, "%s %s\n", h.sign(2, body), body)
		}, "record 1 is not signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, 1)
			h, why := dialHarness(t, serverAddr(s), 0, os.Getpid())
			if h == nil {
				t.Fatal(why)
			}
			tc.write(h)
			h.close()
			chans, _, _ := s.finish(2 * time.Second)
			if c := chans[0]; c == nil || !strings.Contains(c.Forged, tc.want) {
				t.Fatalf("want forged %q, got %+v", tc.want, c)
			}
		})
	}
}

func TestChannelRefusesImpostors(t *testing.T) {
	s := startServer(t, 2)
	addr := serverAddr(s)
	if h, why := dialHarness(t, addr, 0, os.Getpid()+1); h != nil || !strings.HasPrefix(why, "no ") {
		t.Fatalf("a lying pid was accepted: %q", why)
	}
	if h, why := dialHarness(t, addr, 5, os.Getpid()); h != nil || !strings.Contains(why, "claimed rank 5") {
		t.Fatalf("rank out of range: %q", why)
	}
	h, why := dialHarness(t, addr, 1, os.Getpid())
	if h == nil {
		t.Fatal(why)
	}
	defer h.close()
	if h2, why := dialHarness(t, addr, 1, os.Getpid()); h2 != nil || !strings.Contains(why, "second process") {
		t.Fatalf("a second claim of rank 1 was accepted: %q", why)
	}
	conn, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "{\"t\":\"done\",\"rank\":0}\n")
	if reply, _ := bufio.NewReader(conn).ReadString('\n'); !strings.HasPrefix(reply, "no ") {
		t.Fatalf("records without a hello: reply %q", reply)
	}
	conn.Close()
	h.close()
	_, _, intr := s.finish(2 * time.Second)
	if len(intr) != 4 {
		t.Fatalf("want 4 intrusions, got %q", intr)
	}
}

func TestDoneSummaryMustMatch(t *testing.T) {
	const recs = `{"t":"start","rank":0}
{"t":"case","rank":0,"case":"a","ok":true,"checked":5}
{"t":"done","rank":0,"summary":{"records":2,"cases":1,"checked":5,"timing_samples":0}}
`
	rr, err := parseRecords(strings.NewReader(recs), "p", 0)
	if err != nil || rr.SummaryProblem != "" {
		t.Fatalf("honest summary: %v %q", err, rr.SummaryProblem)
	}
	rr, _ = parseRecords(strings.NewReader(strings.Replace(recs, `"checked":5,"timing`, `"checked":6,"timing`, 1)), "p", 0)
	if !strings.Contains(rr.SummaryProblem, "6 elements checked") {
		t.Fatalf("changed summary: %q", rr.SummaryProblem)
	}
	rr, _ = parseRecords(strings.NewReader(strings.Replace(recs, `,"summary":{"records":2,"cases":1,"checked":5,"timing_samples":0}`, "", 1)), "p", 0)
	if !strings.Contains(rr.SummaryProblem, "no summary") {
		t.Fatalf("no summary: %q", rr.SummaryProblem)
	}
}

// rawHello connects, says line, and returns the connection and the checker's reply.
func rawHello(t *testing.T, addr, line string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	conn, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	br := bufio.NewReader(conn)
	io.WriteString(conn, line)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	reply, _ := br.ReadString('\n')
	conn.SetReadDeadline(time.Time{})
	return conn, br, strings.TrimSpace(reply)
}

// A split run (docs/protocol.md §4, "The verifier"): the rank gets its own input keys and not
// the seed; only the process the checker named may be the verifier, and it gets the seed; the
// rank's outputs connection reaches the verifier's connection unchanged, once.
func TestChannelSplitRankAndVerifier(t *testing.T) {
	s, err := newRecordServer(2, 42, true)
	if err != nil {
		t.Fatal(err)
	}
	addr := serverAddr(s)
	pid := os.Getpid()
	_, _, reply := rawHello(t, addr, fmt.Sprintf("hello 1 %d c/1\n", pid))
	f := strings.Fields(reply)
	if len(f) != 5 || f[0] != "ok" || f[2] != "split" {
		t.Fatalf("rank's reply %q, want ok <key> split <rank seed> <pattern seed>", reply)
	}
	rs, _ := strconv.ParseUint(f[3], 10, 64)
	ps, _ := strconv.ParseUint(f[4], 10, 64)
	// The harness makes rank 1's input keys from it exactly as from the seed (csrc/mgpu_core.c).
	for it := 0; it < 3; it++ {
		want := mix64(sha64("mgpu exact rank", 42, 1) ^ uint64(it))
		if got := mix64(rs ^ uint64(it)); got != want {
			t.Fatalf("iteration %d: key %x from the rank seed, %x from the seed", it, got, want)
		}
		if got, want := mix64(ps^uint64(it)), mix64(sha64("mgpu pattern", 42, 0)^uint64(it)); got != want {
			t.Fatalf("iteration %d: pattern key %x, want %x", it, got, want)
		}
	}
	if slices.Contains(f[2:], "42") {
		t.Fatalf("the split rank was sent the seed: %q", reply)
	}

	s.allowVerifier(1, pid+1) // some other process is rank 1's verifier
	_, _, reply = rawHello(t, addr, fmt.Sprintf("verify 1 %d c/1\n", pid))
	if !strings.HasPrefix(reply, "no ") || !strings.Contains(reply, "verifier") {
		t.Fatalf("a verify hello from the wrong process got %q", reply)
	}
	s.allowVerifier(1, pid)
	_, vbr, reply := rawHello(t, addr, fmt.Sprintf("verify 1 %d c/1\n", pid))
	if f := strings.Fields(reply); len(f) != 3 || f[0] != "ok" || f[2] != "42" {
		t.Fatalf("the verifier's reply %q, want ok <key> 42", reply)
	}

	sub, _, reply := rawHello(t, addr, fmt.Sprintf("submit 1 %d\n", pid))
	if reply != "ok" {
		t.Fatalf("submit got %q", reply)
	}
	io.WriteString(sub, "case/0/out 3\nabc")
	sub.Close()
	got, err := io.ReadAll(vbr)
	if err != nil || string(got) != "case/0/out 3\nabc" {
		t.Fatalf("the verifier read %q (%v)", got, err)
	}
	_, _, reply = rawHello(t, addr, fmt.Sprintf("submit 1 %d\n", pid))
	if !strings.HasPrefix(reply, "no ") {
		t.Fatalf("a second outputs connection got %q", reply)
	}
	_, _, intr := s.finish(2 * time.Second)
	if len(intr) != 2 {
		t.Fatalf("intrusions %q, want the wrong verifier and the second outputs connection", intr)
	}
}

// A split rank about to time asks its verifier to catch up ("!drain" on its outputs
// connection); the verifier's signed "drained" record is passed back to the rank, and when the
// verifier goes away the rank reads the end of the stream instead of waiting forever.
func TestChannelDrainedReachesRank(t *testing.T) {
	s, err := newRecordServer(1, 7, true)
	if err != nil {
		t.Fatal(err)
	}
	addr := serverAddr(s)
	pid := os.Getpid()
	rawHello(t, addr, fmt.Sprintf("hello 0 %d c/1\n", pid))
	s.allowVerifier(0, pid)
	vconn, vbr, reply := rawHello(t, addr, fmt.Sprintf("verify 0 %d c/1\n", pid))
	f := strings.Fields(reply)
	if len(f) != 3 || f[0] != "ok" {
		t.Fatalf("verifier reply %q", reply)
	}
	key, _ := hex.DecodeString(f[1])
	v := &harnessConn{t: t, conn: vconn, br: vbr, key: key}
	sub, sbr, reply := rawHello(t, addr, fmt.Sprintf("submit 0 %d\n", pid))
	if reply != "ok" {
		t.Fatalf("submit got %q", reply)
	}
	io.WriteString(sub, "!drain 0\n")
	vconn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := vbr.ReadString('\n'); err != nil || line != "!drain 0\n" {
		t.Fatalf("the verifier read %q (%v)", line, err)
	}
	v.send("{\"t\": \"start\", \"rank\": 0}\n{\"t\": \"drained\", \"rank\": 0}\n")
	sub.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := sbr.ReadString('\n'); err != nil || line != "drained\n" {
		t.Fatalf("the rank read %q (%v), want drained", line, err)
	}
	vconn.Close()
	if line, err := sbr.ReadString('\n'); err != io.EOF {
		t.Fatalf("after the verifier left the rank read %q (%v), want the end of the stream", line, err)
	}
	sub.Close()
	s.finish(2 * time.Second)
}

// sha64 is docs/harness.md's one-way function, written again from the document: the first 8
// bytes, little-endian, of SHA-256(tag || le64(a) || le64(b)).
func sha64(tag string, a, b uint64) uint64 {
	msg := []byte(tag)
	for _, v := range []uint64{a, b} {
		for i := 0; i < 8; i++ {
			msg = append(msg, byte(v>>(8*i)))
		}
	}
	sum := sha256.Sum256(msg)
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(sum[i])
	}
	return v
}
