package checker

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
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

	// split: every rank has a verifier process (docs/protocol.md §4, "The verifier"). Ranks
	// then get the keys of their own inputs instead of the seed, and a second connection
	// ("submit") that carries their outputs to their verifier's connection.
	split bool

	mu         sync.Mutex
	ranks      map[int]*rankChannel
	verifiers  map[int]*rankChannel // the verifiers' records, by rank
	vpids      map[int]int          // the verifier process the checker started, by rank
	vconns     map[int]*net.UnixConn
	submits    map[int]bool
	subconns   map[int]*net.UnixConn // the ranks' outputs connections ("drained" goes back on them)
	vgone      map[int]bool          // verifiers whose connection ended
	ended      bool                  // the ranks have ended (ranksEnded)
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
func newRecordServer(nranks int, seed uint64, split bool) (*recordServer, error) {
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
	s := &recordServer{ln: ln, dir: dir, seed: seed, nranks: nranks, split: split,
		ranks: map[int]*rankChannel{}, conns: map[net.Conn]bool{},
		verifiers: map[int]*rankChannel{}, vpids: map[int]int{}, vconns: map[int]*net.UnixConn{}, submits: map[int]bool{},
		subconns: map[int]*net.UnixConn{}, vgone: map[int]bool{}}
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
	verb := ""
	if len(f) > 0 {
		verb = f[0]
	}
	switch {
	case verb == "submit" && len(f) == 3 && s.split:
	case (verb == "hello" || verb == "verify" && s.split) && len(f) == 4:
	default:
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
	switch verb {
	case "submit":
		s.serveSubmit(conn, br, rank, peer)
		return
	case "verify":
		if want := s.waitVerifierPID(rank); want == 0 || peer != want {
			refuse(fmt.Sprintf("process %d claimed to be rank %d's verifier, which the checker started as process %d", peer, rank, want))
			return
		}
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		refuse("no randomness for a key: " + err.Error())
		return
	}
	rc := &rankChannel{Rank: rank, PID: peer, Harness: f[3]}
	held := s.ranks
	if verb == "verify" {
		held = s.verifiers
	}
	s.mu.Lock()
	prev := held[rank]
	if prev == nil {
		held[rank] = rc
	}
	s.mu.Unlock()
	if prev != nil {
		refuse(fmt.Sprintf("a second process (pid %d) claimed rank %d's records channel, which process %d already holds", peer, rank, prev.PID))
		return
	}
	reply := fmt.Sprintf("ok %s %d\n", hex.EncodeToString(key[:]), s.seed)
	if verb == "hello" && s.split {
		// A split rank gets the keys of its own inputs and of the patterns, never the seed
		// (csrc/mgpu_core.c: mgpu_exact_key, mgpu_pattern_key).
		rs, ps := rankSeed(s.seed, rank), patternSeed(s.seed)
		if strings.HasPrefix(f[3], "py/") {
			rs, ps = pyRankSeed(s.seed, rank), 0 // csrc/python/mgpu_harness.py: _key32
		}
		reply = fmt.Sprintf("ok %s split %d %d\n", hex.EncodeToString(key[:]), rs, ps)
	}
	if _, err := io.WriteString(conn, reply); err != nil {
		return
	}
	if verb == "verify" {
		s.mu.Lock()
		s.vconns[rank] = conn
		if s.ended && !s.submits[rank] {
			s.submits[rank] = true
			conn.CloseWrite()
		}
		s.mu.Unlock()
	}
	var onRecord func([]byte)
	if verb == "verify" {
		onRecord = func(body []byte) { s.verifierSaid(rank, body) }
		defer s.verifierGone(rank)
	}
	s.readRecords(br, rc, key[:], onRecord)
}

// drainedRecord is what a verifier writes when it has checked every output its rank handed
// over before the rank's "!drain" (the rank is about to time: docs/protocol.md §4).
var drainedRecord = regexp.MustCompile(`^\{"t": ?"drained"[,}]`)

// verifierSaid passes a verifier's "drained" on to its rank, which waits for it on its outputs
// connection before timing.
func (s *recordServer) verifierSaid(rank int, body []byte) {
	if !drainedRecord.Match(body) {
		return
	}
	s.mu.Lock()
	c := s.subconns[rank]
	s.mu.Unlock()
	if c != nil {
		io.WriteString(c, "drained\n")
	}
}

// verifierGone ends the rank's wait for answers: a rank waiting to be told its verifier caught
// up reads the end of the stream instead, and goes on.
func (s *recordServer) verifierGone(rank int) {
	s.mu.Lock()
	c := s.subconns[rank]
	s.vgone[rank] = true
	s.mu.Unlock()
	if c != nil {
		c.CloseWrite()
	}
}

// mix64 is the harness's mixing function (docs/harness.md, "Exact data").
func mix64(x uint64) uint64 {
	z := x + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// oneway64 is the harness's one-way function (csrc/mgpu_chan.c, mgpu__oneway64): the first 8
// bytes, little-endian, of SHA-256(tag || le64(a) || le64(b)). A split rank's keys are made
// with it, so that one rank's key, or the run's pattern key, says nothing of the seed or of
// another rank's key (docs/harness.md, "Exact data").
func oneway64(tag string, a, b uint64) uint64 {
	buf := make([]byte, 0, len(tag)+16)
	buf = append(buf, tag...)
	buf = binary.LittleEndian.AppendUint64(buf, a)
	buf = binary.LittleEndian.AppendUint64(buf, b)
	sum := sha256.Sum256(buf)
	return binary.LittleEndian.Uint64(sum[:8])
}

// rankSeed and patternSeed are the keys a split rank gets: mgpu_exact_key(seed, rank, it) is
// mix64(rankSeed(seed, rank) ^ it), mgpu_pattern_key(seed, it) is mix64(patternSeed(seed) ^ it).
func rankSeed(seed uint64, rank int) uint64 {
	return oneway64("mgpu exact rank", seed, uint64(uint32(int32(rank))))
}

func patternSeed(seed uint64) uint64 { return oneway64("mgpu pattern", seed, 0) }

// pyRankSeed is the Python harness's (_rank_key): _key32(seed, rank, it, salt) is
// mix64(mix64(pyRankSeed(seed, rank) ^ it) ^ salt) & 0xFFFFFFFF.
func pyRankSeed(seed uint64, rank int) uint64 {
	return oneway64("mgpu python rank", seed, uint64(int64(rank)))
}

// allowVerifier names the process the checker started as rank's verifier: only it may say
// "verify" for that rank.
func (s *recordServer) allowVerifier(rank, pid int) {
	s.mu.Lock()
	s.vpids[rank] = pid
	s.mu.Unlock()
}

// waitVerifierPID is rank's verifier process, waiting a little for the checker to name it (the
// verifier may connect before the checker has noted its pid); 0 when none was named.
func (s *recordServer) waitVerifierPID(rank int) int {
	deadline := time.Now().Add(helloTimeout)
	for {
		s.mu.Lock()
		pid := s.vpids[rank]
		s.mu.Unlock()
		if pid != 0 || time.Now().After(deadline) {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ranksEnded tells the verifiers of ranks that never opened their outputs connection that
// nothing more will come (the ranks have ended: died early, or never reached the harness).
func (s *recordServer) ranksEnded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	for r, v := range s.vconns {
		if !s.submits[r] {
			s.submits[r] = true // a late submit is refused
			v.CloseWrite()
		}
	}
}

// serveSubmit carries one split rank's outputs to its verifier: the connection must come from
// the process that holds the rank's records channel, once. What it sends is not believed: the
// verifier compares it with what it computed itself.
func (s *recordServer) serveSubmit(conn *net.UnixConn, br *bufio.Reader, rank, peer int) {
	s.mu.Lock()
	if s.ended {
		// The ranks have ended and their verifiers were told: a connection whose process
		// died before it was served here carries nothing anyone waits for.
		s.mu.Unlock()
		return
	}
	rc := s.ranks[rank]
	dup := s.submits[rank]
	ok := rc != nil && !dup && (peer == 0 || rc.PID == peer)
	if ok {
		s.submits[rank] = true
	}
	s.mu.Unlock()
	if !ok {
		why := fmt.Sprintf("process %d opened rank %d's outputs connection, which only the rank's own process may open, once", peer, rank)
		s.intrusion("%s", why)
		fmt.Fprintf(conn, "no %s\n", why)
		return
	}
	if _, err := io.WriteString(conn, "ok\n"); err != nil {
		return
	}
	s.mu.Lock()
	s.subconns[rank] = conn
	gone := s.vgone[rank]
	s.mu.Unlock()
	if gone {
		conn.CloseWrite()
	}
	var v *net.UnixConn
	deadline := time.Now().Add(3 * helloTimeout)
	for v == nil && time.Now().Before(deadline) {
		s.mu.Lock()
		v = s.vconns[rank]
		s.mu.Unlock()
		if v == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if v != nil {
		if _, err := io.Copy(v, br); err == nil {
			v.CloseWrite()
		}
	} else {
		conn.CloseWrite() // no verifier: a rank waiting for one to catch up reads the end
	}
	// Whatever the verifier no longer takes is read and dropped, so the rank never blocks.
	io.Copy(io.Discard, br)
}

// readRecords verifies and keeps records until the connection ends or one fails.
func (s *recordServer) readRecords(br *bufio.Reader, rc *rankChannel, key []byte, onRecord func([]byte)) {
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
		if onRecord != nil {
			onRecord(body)
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
func (s *recordServer) finish(wait time.Duration) (map[int]*rankChannel, map[int]*rankChannel, []string) {
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
	return s.ranks, s.verifiers, append([]string(nil), s.intrusions...)
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
