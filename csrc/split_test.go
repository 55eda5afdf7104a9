package csrc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSplitChecker is the checker's side of a split rank's handshake (docs/protocol.md §4, "The
// verifier"), without the signatures: it answers hello with the rank's own input key instead of
// the seed, accepts the outputs connection, and keeps what arrived on both.
type fakeSplitChecker struct {
	ln      *net.UnixListener
	addr    string
	mu      sync.Mutex
	records []map[string]any
	outputs []byte
	wg      sync.WaitGroup
}

func startFakeSplitChecker(t *testing.T, seed uint64, rank int, py bool) *fakeSplitChecker {
	t.Helper()
	dir, err := os.MkdirTemp("", "mgpu-split-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	addr := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSplitChecker{ln: ln, addr: addr}
	rs, ps := oneway64("mgpu exact rank", seed, uint64(rank)), oneway64("mgpu pattern", seed, 0)
	if py {
		rs, ps = oneway64("mgpu python rank", seed, uint64(rank)), 0
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer conn.Close()
				br := bufio.NewReader(conn)
				hello, _ := br.ReadString('\n')
				switch strings.Fields(hello)[0] {
				case "hello", "verify":
					if strings.HasPrefix(hello, "verify") {
						// A verifier: the seed, then the end of its rank's outputs (none).
						fmt.Fprintf(conn, "ok %s %d\n", strings.Repeat("00", 32), seed)
						conn.(*net.UnixConn).CloseWrite()
					} else {
						fmt.Fprintf(conn, "ok %s split %d %d\n", strings.Repeat("00", 32), rs, ps)
					}
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						_, body, _ := strings.Cut(strings.TrimSpace(line), " ")
						var r map[string]any
						if json.Unmarshal([]byte(body), &r) == nil {
							f.mu.Lock()
							f.records = append(f.records, r)
							f.mu.Unlock()
						}
					}
				case "submit":
					io.WriteString(conn, "ok\n")
					for {
						head, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if head == "!drain 0\n" { // the verifier has caught up
							io.WriteString(conn, "drained\n")
							continue
						}
						i := strings.LastIndexByte(strings.TrimSpace(head), ' ')
						n, _ := strconv.Atoi(strings.TrimSpace(head)[i+1:])
						body := make([]byte, n)
						io.ReadFull(br, body)
						f.mu.Lock()
						f.outputs = append(append(f.outputs, head...), body...)
						f.mu.Unlock()
					}
				}
			}()
		}
	}()
	return f
}

// joined is every record the rank sent, one JSON line each, and the last of them.
func (f *fakeSplitChecker) joined() (string, map[string]any) {
	var all []string
	var last map[string]any
	for _, r := range f.records {
		b, _ := json.Marshal(r)
		all = append(all, string(b))
		last = r
	}
	return strings.Join(all, "\n"), last
}

func (f *fakeSplitChecker) stop() {
	f.ln.Close()
	f.wg.Wait()
}

// checkSplitRank runs what both harnesses must do in a split rank: make its own inputs from
// the key it was sent (the same values as from the seed), send its outputs, and refuse to make
// another rank's inputs, with a driver error that says why.
func checkSplitRank(t *testing.T, f *fakeSplitChecker, seed uint64, code int, want []string) {
	t.Helper()
	if code != 1 {
		t.Errorf("exit %d, want 1 (the other rank's inputs must be refused)", code)
	}
	joined, last := f.joined()
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("records lack %q:\n%s", w, joined)
		}
	}
	if last == nil || last["t"] != "error" || last["where"] != "driver" ||
		!strings.Contains(fmt.Sprint(last["msg"]), "own inputs only") {
		t.Errorf("last record %v, want the driver error refusing another rank's inputs", last)
	}
	if strings.Contains(joined, "seed="+strconv.FormatUint(seed, 10)) {
		t.Errorf("the split rank knows the seed:\n%s", joined)
	}
	if !strings.HasPrefix(string(f.outputs), "t/0 ") {
		t.Errorf("outputs connection got %q, want the hand-over t/0", f.outputs)
	}
}

func TestSplitRankC(t *testing.T) {
	bin := buildCPUDriver(t)
	const seed, rank = uint64(987654321), 1
	f := startFakeSplitChecker(t, seed, rank, false)
	cmd := exec.Command(bin, "split")
	cmd.Dir = t.TempDir()
	cmd.Env = append(baseEnv(), "MGPU_RECORDS=unix:"+f.addr, "MGPU_RANK=1", "MGPU_WORLD_SIZE=2",
		"MGPU_RUN_DIR="+cmd.Dir)
	err := cmd.Run()
	f.stop()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	own := exactValue(seed, rank, 3, 5)
	checkSplitRank(t, f, seed, code, []string{
		fmt.Sprintf("own=%g computes=1 verifies=0", own), "seed=0", "handed=0",
		fmt.Sprintf("ownpat=%d", rankPatternByte(seed, rank, 3, 5)),
	})
	if want := "t/0 8\n"; !strings.HasPrefix(string(f.outputs), want) || len(f.outputs) != len(want)+8 {
		t.Errorf("outputs %q, want %q and 8 bytes", f.outputs, want)
	}
}

// A split rank makes its own byte patterns from its key, and no other rank's: what another
// rank must deliver to it is the verifier's to make.
func TestSplitRankCPatterns(t *testing.T) {
	bin := buildCPUDriver(t)
	const seed, rank = uint64(123456789), 0
	f := startFakeSplitChecker(t, seed, rank, false)
	cmd := exec.Command(bin, "split", "pattern")
	cmd.Dir = t.TempDir()
	cmd.Env = append(baseEnv(), "MGPU_RECORDS=unix:"+f.addr, "MGPU_RANK=0", "MGPU_WORLD_SIZE=2",
		"MGPU_RUN_DIR="+cmd.Dir)
	err := cmd.Run()
	f.stop()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1 (another rank's pattern must be refused)", err)
	}
	joined, last := f.joined()
	if want := fmt.Sprintf("ownpat=%d", rankPatternByte(seed, rank, 3, 5)); !strings.Contains(joined, want) {
		t.Errorf("records lack %q:\n%s", want, joined)
	}
	if strings.Contains(joined, "otherpat=") ||
		last == nil || last["where"] != "driver" || !strings.Contains(fmt.Sprint(last["msg"]), "own patterns only") {
		t.Errorf("another rank's pattern was not refused; last record %v", last)
	}
}

const splitPyDriver = `
import sys, torch, mgpu_harness
h = mgpu_harness.init(default_cases={"a": 4})
own = h.exact(6, iter=3)[5].item()
h.note(f"own={own:g} computes={h.computes} verifies={h.verifies} seed={h.seed}")
h.hand_over("t/0", torch.arange(4, dtype=torch.float32))
h.note(f"drain={h._chan.drain(timeout_s=10)}")
if sys.argv[1] == "case":
    h.record_case("a", True)
h.note("other=%g" % h.exact(6, rank=0, iter=3)[5].item())
sys.exit(h.finish())
`

func TestSplitRankPython(t *testing.T) {
	py, err := filepath.Abs(torchPython(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "drv.py"), []byte(splitPyDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	const seed, rank = uint64(123456789), 1
	pyDir, _ := filepath.Abs("python")
	env := append(baseEnv(), "MGPU_RANK=1", "MGPU_WORLD_SIZE=2", "MGPU_RUN_DIR="+dir,
		"PYTHONPATH="+pyDir, "CUDA_VISIBLE_DEVICES=", "PYTHONDONTWRITEBYTECODE=1")
	// The value rank 1's input has at (iter 3, index 5), made from the seed itself.
	cmd := exec.Command(py, "-c", fmt.Sprintf("import mgpu_harness as m; print('%%g' %% m._exact_chunk(5, 1, m._key32(%d, %d, 3), 'cpu')[0].item())", seed, rank))
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(out))
	for _, mode := range []string{"other", "case"} {
		t.Run(mode, func(t *testing.T) {
			f := startFakeSplitChecker(t, seed, rank, true)
			cmd := exec.Command(py, filepath.Join(dir, "drv.py"), mode)
			cmd.Dir = dir
			cmd.Env = append(env, "MGPU_RECORDS=unix:"+f.addr)
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the Python rank did not end within 60 s")
			}
			f.stop()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if !strings.HasPrefix(string(f.outputs), "t/0 ") || !strings.Contains(string(f.outputs), `"dtype": "float32"`) {
				t.Errorf("outputs connection got %q", f.outputs)
			}
			if mode == "other" {
				checkSplitRank(t, f, seed, code, []string{
					"own=" + want + " computes=True verifies=False seed=None", "drain=True"})
				return
			}
			// A case record is the verifier's.
			last := f.records[len(f.records)-1]
			if code != 1 || last["where"] != "driver" || !strings.Contains(fmt.Sprint(last["msg"]), "records no cases") {
				t.Errorf("exit %d, last record %v: want the driver error refusing a case record", code, last)
			}
		})
	}
}

// A verifier holds the seed: the harness makes it undumpable (no ptrace, no /proc/<pid>/mem for
// the user's other processes) before the checker's reply, in C and in Python; a rank stays as
// it was.
func TestVerifierNotDumpable(t *testing.T) {
	bin := buildCPUDriver(t)
	py, err := filepath.Abs(torchPython(t))
	if err != nil {
		t.Fatal(err)
	}
	pyDir, _ := filepath.Abs("python")
	dir := t.TempDir()
	drv := filepath.Join(dir, "drv.py")
	if err := os.WriteFile(drv, []byte(dumpablePyDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"c", []string{bin, "dumpable"}},
		{"python", []string{py, drv}},
	} {
		for _, role := range []string{"verifier", "rank"} {
			t.Run(tc.name+"/"+role, func(t *testing.T) {
				f := startFakeSplitChecker(t, 42, 0, tc.name == "python")
				cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
				cmd.Dir = t.TempDir()
				cmd.Env = append(baseEnv(), "MGPU_RECORDS=unix:"+f.addr, "MGPU_RANK=0",
					"MGPU_WORLD_SIZE=1", "MGPU_RUN_DIR="+cmd.Dir, "PYTHONPATH="+pyDir,
					"CUDA_VISIBLE_DEVICES=", "PYTHONDONTWRITEBYTECODE=1")
				if role == "verifier" {
					cmd.Env = append(cmd.Env, "MGPU_ROLE=verifier")
				}
				var buf bytes.Buffer
				cmd.Stdout, cmd.Stderr = &buf, &buf
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() { cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					cmd.Process.Kill()
					<-done
					t.Errorf("did not end within 60 s")
				}
				out := buf.Bytes()
				f.stop()
				joined, _ := f.joined()
				want := map[string]string{"verifier": "dumpable=0", "rank": "dumpable=1"}[role]
				if !strings.Contains(joined, want) {
					t.Errorf("records lack %q:\n%s\noutput: %s", want, joined, out)
				}
			})
		}
	}
}

const dumpablePyDriver = `
import ctypes, sys, mgpu_harness
h = mgpu_harness.init(default_cases={"a": 4})
h.note("dumpable=%d" % ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))
sys.exit(h.finish())
`

// The Python harness's fine exact values (docs/python-harness.md): the integer of the same hash
// plus ((x >> 26) & 63) / 64, recomputed here from the 32-bit hash, with values half cannot hold.
func TestPythonFineExact(t *testing.T) {
	py, err := filepath.Abs(torchPython(t))
	if err != nil {
		t.Fatal(err)
	}
	pyDir, _ := filepath.Abs("python")
	const key = 0x2545F491
	cmd := exec.Command(py, "-c", fmt.Sprintf(
		"import mgpu_harness as m\nfor v in m._exact_chunk(0, 256, %d, 'cpu', True).tolist(): print(repr(v))", key))
	cmd.Env = append(baseEnv(), "PYTHONPATH="+pyDir, "CUDA_VISIBLE_DEVICES=", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 256 {
		t.Fatalf("got %d values, want 256", len(lines))
	}
	mul := func(a, b uint32) uint32 { return a * b }
	notHalf := 0
	for i, l := range lines {
		var got float64
		if _, err := fmt.Sscan(l, &got); err != nil {
			t.Fatal(err)
		}
		x := mul(uint32(i), 0x9E3779B1) + key
		x ^= x >> 16
		x = mul(x, 0x85EBCA6B)
		x ^= x >> 13
		x = mul(x, 0xC2B2AE35)
		x ^= x >> 16
		want := float64(int(x%129)-64) + float64((x>>26)&63)/64
		if got != want {
			t.Fatalf("fine value %d = %v, formula says %v", i, got, want)
		}
		// half keeps 11 significant bits: v*64 needs more when |v*64| >= 2048 and is odd
		if m := int64(math.Abs(want * 64)); m >= 2048 && m%2 == 1 {
			notHalf++
		}
	}
	if notHalf < 256/8 {
		t.Errorf("only %d of 256 fine values are beyond half precision; want about a quarter", notHalf)
	}
}
