package checker

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// The records channel (docs/protocol.md §4). The checker listens on a Unix socket in a private
// directory and names it in MGPU_RECORDS. The harness of each rank connects before main, says
// "hello <rank> <pid> <harness>", and gets back "ok <key> <seed>": a fresh 32-byte key for that
// rank and the run's seed, which is in no environment variable, argument or file. Every record
// then comes as "<hmac> <json>", hmac = HMAC-SHA256(key, "<seq> <json>") with seq counting from
// 1. Only records that verify are kept, in order; the first that does not ends what the rank
// can report. The key never leaves the checker and the harness, so a program that writes
// records by itself — a file, the socket, a replay of an earlier run — is caught.

// maxChannelBytes bounds what one rank may send (verified records kept in memory).
const maxChannelBytes = 256 << 20

// helloTimeout is how long a connection may take to say who it is.
const helloTimeout = 10 * time.Second

// recordServer is the checker's end of the channel for one run.
type recordServer struct {
	ln     *net.UnixListener
	dir    string
	seed   uint64
	nranks int

	mu         sync.Mutex
	ranks      map[int]*rankChannel
	intrusions []string
	conns      map[net.Conn]bool
	wg         sync.WaitGroup
}

// rankChannel is what one rank's harness sent.
type rankChannel struct {
	Rank    int
	PID     int // the connecting process, from the kernel (SO_PEERCRED); 0 where unknown
	Harness string
	buf     bytes.Buffer // verified records, one JSON object per line
	// Forged says why the rank's records stopped being accepted ("" when all verified).
	Forged string
	// Cut is set when the connection ended in the middle of a record (the rank died).
	Cut      bool
	Overflow bool
}

// Records is the verified JSON lines.
func (c *rankChannel) Records() []byte { return c.buf.Bytes() }

// newRecordServer listens on a fresh socket. The directory is private to this user, and short
// enough for a socket path (108 bytes) wherever the run directory is.
func newRecordServer(nranks int, seed uint64) (*recordServer, error) {
	dir, err := os.MkdirTemp("", "mgpu-rec-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &recordServer{ln: ln, dir: dir, seed: seed, nranks: nranks, ranks: map[int]*rankChannel{}, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Env is the variable that tells the harness where the channel is.
func (s *recordServer) Env() string { return "MGPU_RECORDS=unix:" + filepath.Join(s.dir, "s") }

func (s *recordServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[conn] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serve(conn)
			conn.Close()
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		}()
	}
}

func (s *recordServer) intrusion(format string, args ...any) {
	s.mu.Lock()
	s.intrusions = append(s.intrusions, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// serve runs one connection: the handshake, then records until the connection ends.
func (s *recordServer) serve(conn *net.UnixConn) {
	peer := peerPID(conn)
	br := bufio.NewReaderSize(conn, 64<<10)
	conn.SetReadDeadline(time.Now().Add(helloTimeout))
	line, err := br.ReadString('\n')
	if err != nil {
		if len(line) > 0 {
			s.intrusion("a process (pid %d) connected to the records channel and sent %q instead of the harness's hello", peer, clip(line, 60))
		}
		return
	}
	conn.SetReadDeadline(time.Time{})
	f := strings.Fields(line)
	refuse := func(why string) {
		s.intrusion("%s", why)
		fmt.Fprintf(conn, "no %s\n", why)
	}
	if len(f) != 4 || f[0] != "hello" {
		refuse(fmt.Sprintf("a process (pid %d) connected to the records channel and sent %q instead of the harness's hello", peer, clip(line, 60)))
		return
	}
	rank, err1 := strconv.Atoi(f[1])
	pid, err2 := strconv.Atoi(f[2])
	switch {
	case err1 != nil || err2 != nil:
		refuse(fmt.Sprintf("a malformed hello %q on the records channel", clip(line, 60)))
		return
	case rank < 0 || rank >= s.nranks:
		refuse(fmt.Sprintf("a process (pid %d) claimed rank %d of a %d-rank run", peer, rank, s.nranks))
		return
	case peer > 0 && pid != peer:
		refuse(fmt.Sprintf("process %d said it was process %d when it claimed rank %d's records channel", peer, pid, rank))
		return
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		refuse("no randomness for a key: " + err.Error())
		return
	}
	rc := &rankChannel{Rank: rank, PID: peer, Harness: f[3]}
	s.mu.Lock()
	prev := s.ranks[rank]
	if prev == nil {
		s.ranks[rank] = rc
	}
	s.mu.Unlock()
	if prev != nil {
		refuse(fmt.Sprintf("a second process (pid %d) claimed rank %d's records channel, which process %d already holds", peer, rank, prev.PID))
		return
	}
	if _, err := fmt.Fprintf(conn, "ok %s %d\n", hex.EncodeToString(key[:]), s.seed); err != nil {
		return
	}
	s.readRecords(br, rc, key[:])
}

// readRecords verifies and keeps records until the connection ends or one fails.
func (s *recordServer) readRecords(br *bufio.Reader, rc *rankChannel, key []byte) {
	mac := hmac.New(sha256.New, key)
	var want [sha256.Size]byte
	for seq := 1; ; seq++ {
		line, err := readLine(br)
		if errors.Is(err, errLongLine) {
			rc.Forged = fmt.Sprintf("record %d is longer than %d bytes", seq, maxRecordLine)
			break
		}
		if len(line) == 0 && err != nil {
			return
		}
		if !bytes.HasSuffix(line, []byte("\n")) {
			rc.Cut = true // the rank died while writing its last record
			return
		}
		line = line[:len(line)-1]
		sig, body, ok := bytes.Cut(line, []byte(" "))
		got := make([]byte, sha256.Size)
		if n, err := hex.Decode(got, sig); !ok || err != nil || n != sha256.Size || len(sig) != 2*sha256.Size {
			rc.Forged = fmt.Sprintf("record %d is not signed (%q)", seq, clip(string(line), 60))
			break
		}
		mac.Reset()
		fmt.Fprintf(mac, "%d ", seq)
		mac.Write(body)
		if !hmac.Equal(mac.Sum(want[:0]), got) {
			rc.Forged = fmt.Sprintf("record %d is not signed with this run's key (%q)", seq, clip(string(body), 60))
			break
		}
		if rc.buf.Len()+len(body)+1 > maxChannelBytes {
			rc.Overflow = true
			break
		}
		rc.buf.Write(body)
		rc.buf.WriteByte('\n')
	}
	// Keep reading so that the writer never blocks on a full socket; nothing more is believed.
	io.Copy(io.Discard, br)
}

// finish stops accepting, waits up to wait for the connections to end (they end when their
// processes exit), then cuts the rest, and removes the socket. It returns what each rank sent
// and the intrusions seen.
func (s *recordServer) finish(wait time.Duration) (map[int]*rankChannel, []string) {
	s.ln.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		<-done
	}
	os.RemoveAll(s.dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ranks, append([]string(nil), s.intrusions...)
}

func clip(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// channelRecords is rank r's records as its harness sent them over the channel, written to
// path for people to read. Every sign of a record that did not come from the harness goes to
// rr.forgery.
func (k *check) channelRecords(rr *runResult, spec launch.Spec, r int, path string) (*rankRecords, error) {
	if _, err := os.Lstat(path); err == nil {
		rr.forgery = append(rr.forgery, fmt.Sprintf("%s appeared in the run directory: under the checker the harness never writes it, so the program wrote it itself", filepath.Base(path)))
	}
	os.Remove(path)
	ch := rr.chans[r]
	if ch == nil {
		return &rankRecords{Rank: r, Path: path, Missing: true}, nil
	}
	if ch.Forged != "" {
		rr.forgery = append(rr.forgery, fmt.Sprintf("rank %d: %s", r, ch.Forged))
	}
	if pid := launchedPID(rr.res, spec, r); pid > 0 && ch.PID > 0 && ch.PID != pid {
		rr.forgery = append(rr.forgery, fmt.Sprintf("rank %d's records came from process %d, not from the rank's own process %d", r, ch.PID, pid))
	}
	os.WriteFile(path, ch.Records(), 0o644)
	recs, err := parseRecords(bytes.NewReader(ch.Records()), path, r)
	if recs == nil {
		recs = &rankRecords{Rank: r, Path: path}
	}
	if ch.Cut {
		recs.Truncated = true
	}
	if ch.Overflow && err == nil {
		err = fmt.Errorf("%s: rank %d sent more than %d MiB of records", path, r, maxChannelBytes>>20)
	}
	if recs.SummaryProblem != "" {
		rr.forgery = append(rr.forgery, fmt.Sprintf("rank %d: %s", r, recs.SummaryProblem))
	}
	return recs, err
}

// launchedPID is the process the launcher started as rank r, where it started the ranks
// itself; 0 under mpirun or the torchrun program, whose ranks it does not start.
func launchedPID(res *launch.Result, spec launch.Spec, r int) int {
	if res == nil || spec.Launcher == launch.MPIRun || spec.UseTorchrun {
		return 0
	}
	for _, rk := range res.Ranks {
		if rk.Rank == r {
			return rk.PID
		}
	}
	return 0
}

// forgeryFailure fails the run stage when anything but the harness reported results.
func (k *check) forgeryFailure(rr *runResult) bool {
	if len(rr.forgery) == 0 {
		return false
	}
	var b strings.Builder
	b.WriteString("The checker accepts results only from the harness: over a private channel, each record signed with a key the harness receives before your code starts. This run's results did not all come that way:\n")
	for _, f := range rr.forgery {
		fmt.Fprintf(&b, "  - %s\n", f)
	}
	b.WriteString("Your code must not write results, files in the run directory, or anything to the checker's channel, nor call the harness's recording functions: the driver checks your outputs and reports them. Take out whatever does, and let the driver see what your code computed.")
	k.fail(StageRun, FaultYou, "records not written by the harness: "+rr.forgery[0], b.String())
	return true
}
