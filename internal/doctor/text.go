package doctor

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// WriteText writes the report as one screen to paste into a forum: the system, GPUs, their
// topology and peer access, the tools, the environment variables that change behaviour, the
// modules with what is missing and how to fix it, and the probes that failed. plain leaves out
// colour.
func (r *Report) WriteText(w io.Writer, plain bool) error {
	p := &printer{plain: plain}
	f := r.Facts
	if f == nil {
		f = &probe.Facts{}
	}
	p.header(f)
	p.gpus(f)
	p.tools(f)
	p.slurm(r.Slurm)
	p.isolation(r.Isolation)
	p.env(f)
	p.modules(r.Modules)
	p.problems(f)
	_, err := io.WriteString(w, p.b.String())
	return err
}

type printer struct {
	b     strings.Builder
	plain bool
}

const (
	bold  = "\x1b[1m"
	green = "\x1b[32m"
	red   = "\x1b[31m"
	dim   = "\x1b[2m"
	reset = "\x1b[0m"
)

func (p *printer) paint(style, s string) string {
	if p.plain || s == "" {
		return s
	}
	return style + s + reset
}

func (p *printer) line(format string, args ...any) {
	fmt.Fprintf(&p.b, format, args...)
	p.b.WriteByte('\n')
}

func (p *printer) heading(title, rest string) {
	if rest != "" {
		p.line("%s  %s", p.paint(bold, title), rest)
		return
	}
	p.line("%s", p.paint(bold, title))
}

// table writes rows with aligned columns, indented by two spaces; after[i] lines follow row i
// unaligned.
func (p *printer) table(rows [][]string, after map[int][]string) {
	var width []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], visibleLen(c))
		}
	}
	for n, row := range rows {
		var b strings.Builder
		b.WriteString("  ")
		for i, c := range row {
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-visibleLen(c)+2))
			}
		}
		p.line("%s", strings.TrimRight(b.String(), " "))
		for _, l := range after[n] {
			p.line("%s", l)
		}
	}
}

var (
	ansiRE    = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	versionRE = regexp.MustCompile(`\b\d+\.\d+(\.\d+)?\b`)
)

func visibleLen(s string) int { return utf8.RuneCountInString(ansiRE.ReplaceAllString(s, "")) }

func (p *printer) header(f *probe.Facts) {
	when := "probed " + f.Taken.UTC().Format("2006-01-02 15:04 UTC")
	if f.FromCache {
		when += " (from cache)"
	}
	host := f.Hostname
	if host == "" {
		host = "this machine"
	}
	p.line("%s: %s, %s", p.paint(bold, "mgpu-learn doctor"), host, when)
	p.line("")
	sys := f.OS
	if f.Kernel != "" {
		sys += ", kernel " + f.Kernel
	}
	p.heading("System ", sys)
	if f.Driver != "" {
		d := "NVIDIA " + f.Driver
		if f.CUDA != "" {
			d += ", CUDA " + f.CUDA
		}
		p.heading("Driver ", d)
	} else {
		p.heading("Driver ", p.paint(dim, "none (nvidia-smi not found, or it cannot reach a driver)"))
	}
}

func (p *printer) gpus(f *probe.Facts) {
	n := len(f.GPUs)
	switch {
	case n == 0 && f.Visible != "":
		p.heading("GPUs   ", "none visible: "+f.Visible)
	case n == 0:
		p.heading("GPUs   ", p.paint(dim, "none"))
	default:
		p.heading("GPUs   ", plural(n, "GPU", "GPUs"))
		rows := [][]string{{"#", "name", "memory", "compute", "uuid"}}
		for _, g := range f.GPUs {
			idx := fmt.Sprint(g.Index)
			if g.Physical != g.Index {
				idx += fmt.Sprintf(" (nvidia-smi %d)", g.Physical)
			}
			mem := "?"
			if g.MemoryMiB > 0 {
				mem = fmt.Sprintf("%.1f GiB", float64(g.MemoryMiB)/1024)
			}
			cc := g.Compute
			if cc == "" {
				cc = "?"
			}
			rows = append(rows, []string{idx, g.Name, mem, cc, g.UUID})
		}
		p.table(rows, nil)
		if f.Visible != "" {
			p.line("  %s", f.Visible)
		}
	}
	if n < 2 {
		return
	}
	p.matrix("Topology", "nvidia-smi topo -m; NV# = # NVLinks, PIX/PXB = PCIe switch, PHB/NODE/SYS = through the CPU", f.Links)
	p.matrix("Peer access", "nvidia-smi topo -p2p r; OK = possible", f.PeerStatus)
}

func (p *printer) matrix(title, legend string, m [][]string) {
	if m == nil {
		p.heading(title, p.paint(dim, "unknown (see problems)"))
		return
	}
	p.heading(title, "("+legend+")")
	head := []string{""}
	for j := range m {
		head = append(head, fmt.Sprintf("GPU%d", j))
	}
	rows := [][]string{head}
	for i, row := range m {
		rows = append(rows, append([]string{fmt.Sprintf("GPU%d", i)}, row...))
	}
	p.table(rows, nil)
}

func (p *printer) missing() string { return p.paint(dim, "not found") }

func (p *printer) tools(f *probe.Facts) {
	p.heading("Tools", "")
	var rows [][]string
	tool := func(name string, t *probe.Tool) {
		if t == nil {
			rows = append(rows, []string{name, p.missing(), ""})
			return
		}
		v := t.Version
		if v == "" {
			v = "version unknown"
		}
		where := t.Path
		if t.Source == "pip" {
			where += " (pip wheel)"
		}
		rows = append(rows, []string{name, v, where})
	}
	lib := func(name string, l *probe.Library) {
		if l == nil {
			rows = append(rows, []string{name, p.missing(), ""})
			return
		}
		v := l.Version
		if v == "" {
			v = "version unknown"
		}
		src := l.Source
		switch src {
		case "pip":
			src = "pip wheel"
		case "env":
			src = "$" + strings.ToUpper(name) + "_HOME"
		}
		rows = append(rows, []string{name, v + " (" + src + ")", l.Include + ", " + l.LibDir})
	}
	tool("nvcc", f.NVCC)
	if f.CC != nil {
		cc := *f.CC
		if v := versionRE.FindAllString(cc.Version, -1); len(v) > 0 {
			cc.Version = v[len(v)-1] // "cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0" -> "13.3.0"
		}
		tool("cc", &cc)
	} else {
		tool("cc", nil)
	}
	lib("NCCL", f.NCCL)
	lib("NVSHMEM", f.NVSHMEM)
	if m := f.MPI; m != nil {
		rows = append(rows, []string{"MPI", mpiName(m), strings.TrimSpace(m.Mpirun + "; " + p.cudaAware(m))})
	} else {
		rows = append(rows, []string{"MPI", p.missing(), ""})
	}
	switch m := f.CudaMPI; {
	case m == nil:
		rows = append(rows, []string{"CUDA MPI", p.missing(), "(looked on PATH, at $MGPU_CUDA_MPI_HOME, $MPI_HOME and /tmp/ompi-cuda)"})
	case m == f.MPI || (f.MPI != nil && m.Mpirun == f.MPI.Mpirun):
		rows = append(rows, []string{"CUDA MPI", "the MPI above", ""})
	default:
		rows = append(rows, []string{"CUDA MPI", mpiName(m), m.Home + "; " + p.cudaAware(m)})
	}
	if py := f.Python; py != nil {
		v := py.Version
		if v == "" {
			v = "version unknown"
		}
		rows = append(rows, []string{"Python", v, py.Path})
		switch t := py.Torch; {
		case t != nil:
			var about []string
			if t.CUDA != "" {
				about = append(about, "CUDA "+t.CUDA)
			} else {
				about = append(about, "CPU-only build")
			}
			if t.NCCL != "" {
				about = append(about, "NCCL "+t.NCCL)
			}
			if t.CUDAAvailable {
				about = append(about, "sees "+plural(t.DeviceCount, "GPU", "GPUs"))
			} else {
				about = append(about, "torch.cuda.is_available() is False")
			}
			rows = append(rows, []string{"torch", t.Version, strings.Join(about, ", ")})
		case py.TorchError != "":
			rows = append(rows, []string{"torch", p.paint(red, "broken"), py.TorchError})
		default:
			rows = append(rows, []string{"torch", p.missing(), ""})
		}
		if py.Torchrun != "" {
			rows = append(rows, []string{"torchrun", "", py.Torchrun})
		} else {
			rows = append(rows, []string{"torchrun", p.missing(), ""})
		}
	} else {
		rows = append(rows, []string{"Python", p.missing(), ""})
	}
	if f.Slurm != nil {
		v := f.Slurm.Version
		if v == "" {
			v = "version unknown"
		}
		where := f.Slurm.Path
		if f.Sbatch != nil {
			where += ", " + f.Sbatch.Path
		}
		rows = append(rows, []string{"Slurm", v, where})
	} else {
		rows = append(rows, []string{"Slurm", p.missing(), ""})
	}
	p.table(rows, nil)
}

// slurm writes where this shell stands with Slurm and how checks start their ranks.
func (p *printer) slurm(st *SlurmStatus) {
	if st == nil {
		return
	}
	where := "not inside an allocation"
	if j := st.Job; j != nil {
		where = "inside job " + j.JobID
		if j.StepID != "" {
			where += ", step " + j.StepID
		}
		if j.Node != "" {
			where += ", on node " + j.Node
		} else if j.NodeList != "" {
			where += ", nodes " + j.NodeList
		}
		if j.Partition != "" {
			where += " (partition " + j.Partition + ")"
		}
		var held []string
		if j.CPUs > 0 {
			held = append(held, plural(j.CPUs, "CPU", "CPUs"))
		}
		held = append(held, plural(j.GPUs, "GPU", "GPUs"))
		where += ": " + strings.Join(held, ", ") + " allocated on this node"
	}
	p.heading("Slurm", where)
	p.line("  checks: %s", st.Launch)
	if st.Problem != "" {
		p.line("  %s %s", p.paint(red, "problem:"), st.Problem)
	}
}

func mpiName(m *probe.MPI) string {
	if n := strings.TrimSpace(m.Vendor + " " + m.Version); n != "" {
		return n
	}
	return "unknown MPI"
}

// cudaAware says whether an MPI handles GPU buffers and on what evidence.
func (p *printer) cudaAware(m *probe.MPI) string {
	var why []string
	switch m.CudaBuilt {
	case "true":
		why = append(why, "built with CUDA")
	case "false":
		why = append(why, "built without CUDA")
	}
	if m.CudaBuilt == "true" && m.CudaRuntime == "false" {
		why = append(why, "but CUDA support is off at run time")
	}
	if m.CudaHeader != "" {
		why = append(why, "mpi-ext.h MPIX_CUDA_AWARE_SUPPORT="+m.CudaHeader)
	}
	s := "CUDA-aware: " + p.paint(red, "no")
	if m.CudaAware {
		s = "CUDA-aware: " + p.paint(green, "yes")
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	return s
}

func (p *printer) isolation(iso *Isolation) {
	if iso == nil {
		return
	}
	if iso.Why == "" {
		p.heading("Isolation", fmt.Sprintf("%s (Landlock ABI %d): the programs of C and CUDA checks cannot write the build cache in %s",
			p.paint(green, "yes"), iso.Landlock, iso.Cache))
	} else {
		p.heading("Isolation", p.paint(red, "no")+": "+iso.Why+"; a learner's C or CUDA program could rewrite cached programs, so a pass proves less (docs/protocol.md §4)")
	}
	p.heading("Verifiers", verifierIsolation(iso.PtraceScope, p))
}

// verifierIsolation says whether a rank could reach into its verifier's memory (Yama).
func verifierIsolation(scope int, p *printer) string {
	switch {
	case scope >= 1:
		return fmt.Sprintf("%s (Yama ptrace_scope %d): a rank cannot trace its verifier, which is the checker's child, not the rank's", p.paint(green, "separate"), scope)
	case scope == 0:
		return p.paint(red, "traceable") + " (Yama ptrace_scope 0): native code in a rank could reach into its verifier's memory, a process of the same user; sysctl kernel.yama.ptrace_scope=1 closes it (docs/protocol.md §4)"
	default:
		return "no Yama on this kernel: whether a rank can trace its verifier depends on other security modules (docs/protocol.md §4)"
	}
}

func (p *printer) env(f *probe.Facts) {
	if len(f.Env) == 0 {
		p.heading("Environment", p.paint(dim, "none of CUDA_VISIBLE_DEVICES, NCCL_*, NVSHMEM_*, OMPI_*, UCX_*, TORCH_*, MGPU_* is set"))
		return
	}
	p.heading("Environment", "")
	keys := make([]string, 0, len(f.Env))
	for k := range f.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := f.Env[k]
		if len(v) > 100 {
			v = v[:97] + "..."
		}
		p.line("  %s=%s", k, v)
	}
}

func (p *printer) modules(mods []ModuleRow) {
	if len(mods) == 0 {
		return
	}
	ok, total := 0, 0
	for _, m := range mods {
		ok += m.ExercisesRunnable
		total += m.ExercisesTotal
	}
	p.heading("Modules", fmt.Sprintf("(%d of %s can run here)", ok, plural(total, "exercise", "exercises")))
	rows := [][]string{{"module", "runs", "exercises", "title"}}
	after := map[int][]string{}
	pad := "    "
	for i, m := range mods {
		runs := p.paint(green, "yes")
		if !m.Runnable {
			runs = p.paint(red, "no")
		}
		rows = append(rows, []string{m.Module, runs, fmt.Sprintf("%d/%d", m.ExercisesRunnable, m.ExercisesTotal), m.Title})
		for _, u := range m.Uses {
			after[i+1] = append(after[i+1], pad+"uses "+u)
		}
		for _, r := range m.Missing {
			after[i+1] = append(after[i+1], pad+"- "+r.What, pad+"  fix: "+r.Fix)
		}
	}
	p.table(rows, after)
}

func (p *printer) problems(f *probe.Facts) {
	if len(f.Problems) == 0 {
		return
	}
	p.heading("Problems", "(probes that failed; what they would have found is missing above)")
	for _, pr := range f.Problems {
		p.line("  - %s", pr)
	}
}
