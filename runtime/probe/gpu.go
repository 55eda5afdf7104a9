package probe

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

const gpuQuery = "index,name,memory.total,compute_cap,uuid,driver_version"

// gpus fills f's GPUs, topology, peer matrix, driver and CUDA version from nvidia-smi, narrowed
// to CUDA_VISIBLE_DEVICES.
func (p *prober) gpus(ctx context.Context, f *Facts) {
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return
	}
	out, ok := p.exec(ctx, smi, "--query-gpu="+gpuQuery, "--format=csv,noheader,nounits")
	if !ok {
		return
	}
	all, driver, err := parseGPUQuery(out)
	if err != nil {
		p.problem("nvidia-smi --query-gpu: %v", err)
		return
	}
	f.Driver = driver
	f.AllGPUs = len(all)
	if len(all) == 0 {
		return
	}
	var topo, p2p, version string
	var topoOK, p2pOK bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); version = p.cudaVersion(ctx, smi) }()
	if len(all) > 1 {
		wg.Add(2)
		go func() { defer wg.Done(); topo, topoOK = p.exec(ctx, smi, "topo", "-m") }()
		go func() { defer wg.Done(); p2p, p2pOK = p.exec(ctx, smi, "topo", "-p2p", "r") }()
	}
	wg.Wait()
	f.CUDA = version

	var links, status [][]string
	if topoOK {
		links = parseMatrix(topo, all)
		if links == nil {
			p.problem("nvidia-smi topo -m: no GPU matrix in its output")
		}
	}
	if p2pOK {
		status = parseMatrix(p2p, all)
		if status == nil {
			p.problem("nvidia-smi topo -p2p r: no GPU matrix in its output")
		}
	}
	if len(all) == 1 { // nothing to ask nvidia-smi about a single GPU
		links, status = [][]string{{"X"}}, [][]string{{"X"}}
	}
	cvd, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	keep, note := visibleSubset(all, cvd, set)
	f.Visible = note
	f.GPUs = make([]GPU, len(keep))
	for i, k := range keep {
		f.GPUs[i] = all[k]
		f.GPUs[i].Index = i
	}
	f.Links = subMatrix(links, keep)
	f.PeerStatus = subMatrix(status, keep)
	if f.PeerStatus != nil {
		f.Peer = make([][]bool, len(keep))
		for i, row := range f.PeerStatus {
			f.Peer[i] = make([]bool, len(row))
			for j, w := range row {
				f.Peer[i][j] = w == "OK"
			}
		}
	}
}

var cudaVersionRE = regexp.MustCompile(`CUDA Version\s*:\s*([0-9][0-9.]*)`)

// cudaVersion is the driver's CUDA version: `nvidia-smi --version` on recent drivers, else the
// header of plain `nvidia-smi`.
func (p *prober) cudaVersion(ctx context.Context, smi string) string {
	if out, _, err := run(ctx, command{path: smi, args: []string{"--version"}, timeout: p.opts.Timeout}); err == nil {
		if m := cudaVersionRE.FindStringSubmatch(out); m != nil {
			return m[1]
		}
	}
	if out, ok := p.exec(ctx, smi); ok {
		if m := cudaVersionRE.FindStringSubmatch(out); m != nil {
			return m[1]
		}
	}
	return ""
}

// parseGPUQuery reads nvidia-smi --query-gpu=index,name,memory.total,compute_cap,uuid,
// driver_version --format=csv,noheader,nounits. GPU.Index and Physical are nvidia-smi's index.
func parseGPUQuery(out string) ([]GPU, string, error) {
	var gpus []GPU
	driver := ""
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if len(fields) < 6 {
			return nil, "", fmt.Errorf("line %d: want 6 fields, got %q", n+1, line)
		}
		if len(fields) > 6 { // a comma in the name
			name := strings.Join(fields[1:len(fields)-4], ", ")
			fields = append([]string{fields[0], name}, fields[len(fields)-4:]...)
		}
		idx, err := strconv.Atoi(fields[0])
		if err != nil {
			return nil, "", fmt.Errorf("line %d: index %q: not a number", n+1, fields[0])
		}
		mem, _ := strconv.Atoi(fields[2]) // "[N/A]" on some boards: 0
		cc := fields[3]
		if !computeRE.MatchString(cc) {
			cc = ""
		}
		gpus = append(gpus, GPU{Index: idx, Physical: idx, Name: fields[1], MemoryMiB: mem, Compute: cc, UUID: fields[4]})
		if driver == "" {
			driver = fields[5]
		}
	}
	return gpus, driver, nil
}

var (
	computeRE  = regexp.MustCompile(`^\d+\.\d+$`)
	ansiRE     = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	gpuLabelRE = regexp.MustCompile(`^GPU(\d+)$`)
)

// parseMatrix reads the GPU-by-GPU part of nvidia-smi topo -m or topo -p2p r: a header line
// of column labels (GPU0 GPU1 ... then NICs, CPU Affinity...) and one line per device. Only
// GPU rows and GPU columns are kept, ordered like gpus (by nvidia-smi index). It returns nil
// when the output holds no complete matrix.
func parseMatrix(out string, gpus []GPU) [][]string {
	pos := map[int]int{} // nvidia-smi index -> position in gpus
	for i, g := range gpus {
		pos[g.Physical] = i
	}
	var cols []int // column number -> nvidia-smi index, for the leading GPU columns
	m := make([][]string, len(gpus))
	rows := 0
	for _, line := range strings.Split(ansiRE.ReplaceAllString(out, ""), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if cols == nil {
			if gpuLabelRE.MatchString(fields[0]) && len(fields) > 1 && gpuLabelRE.MatchString(fields[1]) {
				for _, f := range fields {
					mm := gpuLabelRE.FindStringSubmatch(f)
					if mm == nil {
						break
					}
					n, _ := strconv.Atoi(mm[1])
					cols = append(cols, n)
				}
			}
			continue
		}
		mm := gpuLabelRE.FindStringSubmatch(fields[0])
		if mm == nil {
			if fields[0] == "Legend:" {
				break
			}
			continue
		}
		n, _ := strconv.Atoi(mm[1])
		r, ok := pos[n]
		if !ok || len(fields) < 1+len(cols) {
			continue
		}
		row := make([]string, len(gpus))
		for c, idx := range cols {
			if j, ok := pos[idx]; ok {
				row[j] = fields[1+c]
			}
		}
		if m[r] == nil {
			rows++
		}
		m[r] = row
	}
	if rows != len(gpus) {
		return nil
	}
	for _, row := range m {
		for _, w := range row {
			if w == "" {
				return nil
			}
		}
	}
	return m
}

// visibleSubset applies CUDA_VISIBLE_DEVICES the way the CUDA runtime does: a comma-separated
// list of indices or UUID prefixes, read up to the first entry that names no device. It
// returns the positions kept (in that order) and a note for the report ("" when unset).
func visibleSubset(all []GPU, cvd string, set bool) ([]int, string) {
	every := make([]int, len(all))
	for i := range all {
		every[i] = i
	}
	if !set {
		return every, ""
	}
	var keep []int
	seen := map[int]bool{}
	for _, tok := range strings.Split(cvd, ",") {
		tok = strings.TrimSpace(tok)
		at := -1
		switch {
		case strings.HasPrefix(tok, "MIG-"):
			return every, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s names MIG instances; showing every GPU", cvd)
		case strings.HasPrefix(tok, "GPU-"):
			for i, g := range all {
				if strings.HasPrefix(g.UUID, tok) {
					if at >= 0 { // ambiguous prefix
						at = -1
						break
					}
					at = i
				}
			}
		default:
			n, err := strconv.Atoi(tok)
			if err == nil {
				for i, g := range all {
					if g.Physical == n {
						at = i
					}
				}
			}
		}
		if at < 0 || seen[at] {
			break
		}
		seen[at] = true
		keep = append(keep, at)
	}
	var phys []string
	for _, k := range keep {
		phys = append(phys, strconv.Itoa(all[k].Physical))
	}
	note := fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s: %d of %d GPUs visible", cvd, len(keep), len(all))
	if len(keep) > 0 {
		note += " (nvidia-smi " + strings.Join(phys, ",") + ")"
	}
	return keep, note
}

// subMatrix keeps the rows and columns of m listed in keep, in that order.
func subMatrix(m [][]string, keep []int) [][]string {
	if m == nil {
		return nil
	}
	out := make([][]string, len(keep))
	for i, r := range keep {
		out[i] = make([]string, len(keep))
		for j, c := range keep {
			out[i][j] = m[r][c]
		}
	}
	return out
}
