package launch

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// maxLine bounds one line of output; the rest of a longer line is dropped and counted.
const maxLine = 8 << 10

const defaultTailBytes = 64 << 10

// ring keeps the last size bytes written to it.
type ring struct {
	buf     []byte
	start   int // index of the oldest byte
	n       int // bytes held
	evicted int64
}

func newRing(size int) *ring {
	if size <= 0 {
		size = defaultTailBytes
	}
	return &ring{buf: make([]byte, size)}
}

func (r *ring) write(p []byte) {
	size := len(r.buf)
	if len(p) >= size {
		r.evicted += int64(r.n + len(p) - size)
		copy(r.buf, p[len(p)-size:])
		r.start, r.n = 0, size
		return
	}
	if over := r.n + len(p) - size; over > 0 {
		r.start = (r.start + over) % size
		r.n -= over
		r.evicted += int64(over)
	}
	pos := (r.start + r.n) % size
	k := copy(r.buf[pos:], p)
	copy(r.buf, p[k:])
	r.n += len(p)
}

// contents returns the bytes held, oldest first. When older bytes were evicted, the partial
// first line is cut as well so the tail starts at a line; the second result counts what was
// not returned.
func (r *ring) contents() (string, int64) {
	out := make([]byte, 0, r.n)
	end := r.start + r.n
	if end <= len(r.buf) {
		out = append(out, r.buf[r.start:end]...)
	} else {
		out = append(out, r.buf[r.start:]...)
		out = append(out, r.buf[:end-len(r.buf)]...)
	}
	lost := r.evicted
	if lost > 0 {
		if i := bytes.IndexByte(out, '\n'); i >= 0 && i+1 < len(out) {
			lost += int64(i + 1)
			out = out[i+1:]
		}
	}
	return string(out), lost
}

// sink is where one rank's lines (or the launcher's) go: the caller's callback and a tail.
type sink struct {
	rank    int
	out     func(int, string)
	mu      sync.Mutex
	tail    *ring
	dropped int64 // bytes cut from over-long lines
	scratch []byte
}

func newSink(rank, tailBytes int, out func(int, string)) *sink {
	return &sink{rank: rank, out: out, tail: newRing(tailBytes)}
}

// line takes one line without its newline; cut counts the bytes dropped from its end.
func (s *sink) line(b []byte, cut int64) {
	b = bytes.TrimSuffix(b, []byte{'\r'})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scratch = append(s.scratch[:0], b...)
	if cut > 0 {
		s.scratch = append(s.scratch, " … [line cut: "...)
		s.scratch = strconv.AppendInt(s.scratch, cut, 10)
		s.scratch = append(s.scratch, " more bytes]"...)
		s.dropped += cut
	}
	if s.out != nil {
		s.out(s.rank, string(s.scratch))
	}
	s.scratch = append(s.scratch, '\n')
	s.tail.write(s.scratch)
}

// result returns the tail and the count of bytes that are not in it.
func (s *sink) result() (string, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, lost := s.tail.contents()
	return t, lost + s.dropped
}

// splitLines reads r to its end and hands every line (without '\n', at most maxLine bytes)
// to emit with the number of bytes cut from it. Memory use is bounded whatever r delivers.
func splitLines(r io.Reader, emit func(line []byte, cut int64)) {
	buf := make([]byte, 64<<10)
	cur := make([]byte, 0, maxLine)
	var cut int64
	for {
		n, err := r.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			seg := data
			if i >= 0 {
				seg, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			if room := maxLine - len(cur); len(seg) > room {
				cur = append(cur, seg[:room]...)
				cut += int64(len(seg) - room)
			} else {
				cur = append(cur, seg...)
			}
			if i >= 0 {
				emit(cur, cut)
				cur, cut = cur[:0], 0
			}
		}
		if err != nil {
			if len(cur) > 0 || cut > 0 {
				emit(cur, cut)
			}
			return
		}
	}
}

// Tag parsers for launchers that multiplex the ranks' output. Each returns the rank and the
// line without its tag, or ok=false for a line of the launcher itself.

var ompiTags = [][]byte{[]byte("<stdout>:"), []byte("<stderr>:"), []byte("<stddiag>:")}

// openMPITag parses --tag-output lines: "[1,3]<stdout>:text" (Open MPI 4) or
// "[1,3]<stderr>: text" (Open MPI 5).
func openMPITag(b []byte) (int, []byte, bool) {
	if len(b) < 2 || b[0] != '[' {
		return 0, nil, false
	}
	i := 1
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 1 || i >= len(b) || b[i] != ',' {
		return 0, nil, false
	}
	rank, j, ok := number(b, i+1)
	if !ok || j >= len(b) || b[j] != ']' {
		return 0, nil, false
	}
	rest := b[j+1:]
	for _, tag := range ompiTags {
		if bytes.HasPrefix(rest, tag) {
			// Open MPI 5 puts a space after the tag; a line's own leading space is lost
			// under Open MPI 4, which is harmless.
			return rank, bytes.TrimPrefix(rest[len(tag):], []byte{' '}), true
		}
	}
	return 0, nil, false
}

// mpichTag parses -prepend-rank lines: "[3] text".
func mpichTag(b []byte) (int, []byte, bool) {
	if len(b) < 3 || b[0] != '[' {
		return 0, nil, false
	}
	rank, j, ok := number(b, 1)
	if !ok || j >= len(b) || b[j] != ']' {
		return 0, nil, false
	}
	return rank, bytes.TrimPrefix(b[j+1:], []byte{' '}), true
}

// torchrunTag parses torchrun's --tee prefix: "[default3]:text".
func torchrunTag(b []byte) (int, []byte, bool) {
	if len(b) < 4 || b[0] != '[' {
		return 0, nil, false
	}
	i := 1
	for i < len(b) && (b[i] == '_' || b[i] >= 'a' && b[i] <= 'z' || b[i] >= 'A' && b[i] <= 'Z') {
		i++
	}
	rank, j, ok := number(b, i)
	if !ok || j+1 >= len(b) || b[j] != ']' || b[j+1] != ':' {
		return 0, nil, false
	}
	return rank, b[j+2:], true
}

// number reads decimal digits of b from i; it returns the value and the index after them.
func number(b []byte, i int) (int, int, bool) {
	start, v := i, 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-start < 9 {
		v = v*10 + int(b[i]-'0')
		i++
	}
	return v, i, i > start
}
