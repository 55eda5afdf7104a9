package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// A need is one unmet requirement said in a few words, for a line of `list` or a row of the
// UI's course map; doctor's reasons say the rest (what was looked for, how to get it).
type need struct {
	key    string // doctor's Need
	words  string // "2 GPUs (this machine has none)", "nvcc", "NCCL"
	brief  string // words without what this machine has: "2 GPUs"
	amount int    // GPUs needed, compute capability x10: the larger need wins a merge
}

// needsOf says rs, doctor's reasons why m cannot run on the machine f describes, in a few
// words each, in doctor's order.
func needsOf(f *probe.Facts, m *course.Manifest, rs []doctor.Reason) []need {
	var out []need
	for _, r := range rs {
		n := need{key: r.Need}
		switch r.Need {
		case doctor.NeedGPUs:
			n.amount = m.Requires.GPUs
			n.words, n.brief = gpuWords(m.Requires.GPUs, f)
		case doctor.NeedCompute:
			n.words = "compute capability " + m.Requires.MinCompute + " or higher"
			var major, minor int
			if _, err := fmt.Sscanf(m.Requires.MinCompute, "%d.%d", &major, &minor); err == nil {
				n.amount = 10*major + minor
			}
		case doctor.NeedPeerAccess:
			n.words = "peer access between GPUs"
		case doctor.NeedNVCC:
			n.words = "nvcc"
		case doctor.NeedCC:
			n.words = "a C compiler"
		case doctor.NeedPython:
			n.words = "Python 3"
		case doctor.NeedTorch:
			n.words = "PyTorch"
			if f != nil && f.Python != nil && f.Python.Torch != nil {
				n.words = "PyTorch with CUDA" // it is there, but can't reach the GPUs
			}
		case doctor.NeedNCCL:
			n.words = "NCCL"
		case doctor.NeedNVSHMEM:
			n.words = "NVSHMEM"
		case doctor.NeedMPI:
			n.words = "MPI"
		case doctor.NeedCudaAwareMPI:
			n.words = "a CUDA-aware MPI"
		case doctor.NeedMPIRun:
			n.words = "mpirun"
		default:
			// A need this list does not know yet: doctor's own words, up to the first ";".
			n.words, _, _ = strings.Cut(strings.TrimPrefix(r.What, "needs "), ";")
		}
		if n.brief == "" {
			n.brief = n.words
		}
		out = append(out, n)
	}
	return out
}

// gpuWords is "2 GPUs (this machine has none)", and "2 GPUs".
func gpuWords(want int, f *probe.Facts) (words, brief string) {
	brief = fmt.Sprintf("%d GPUs", want)
	if want == 1 {
		brief = "1 GPU"
	}
	switch {
	case f == nil:
		return brief, brief
	case len(f.GPUs) == 0:
		return brief + " (this machine has none)", brief
	}
	return fmt.Sprintf("%s (this machine has %d)", brief, len(f.GPUs)), brief
}

// needOrder is doctor's order of needs, most basic first.
var needOrder = []string{doctor.NeedGPUs, doctor.NeedCompute, doctor.NeedPeerAccess, doctor.NeedNVCC,
	doctor.NeedCC, doctor.NeedPython, doctor.NeedTorch, doctor.NeedNCCL, doctor.NeedNVSHMEM,
	doctor.NeedMPI, doctor.NeedCudaAwareMPI, doctor.NeedMPIRun}

// mergeNeeds adds ns to into, one need per key, most basic first; for GPUs and compute
// capability the larger need wins.
func mergeNeeds(into, ns []need) []need {
	for _, n := range ns {
		found := false
		for i := range into {
			if into[i].key == n.key {
				found = true
				if n.amount > into[i].amount {
					into[i] = n
				}
			}
		}
		if !found {
			into = append(into, n)
		}
	}
	slices.SortStableFunc(into, func(a, b need) int { return needRank(a.key) - needRank(b.key) })
	return into
}

func needRank(key string) int {
	if i := slices.Index(needOrder, key); i >= 0 {
		return i
	}
	return len(needOrder)
}

// sayNeeds joins needs: "2 GPUs (this machine has none), nvcc, NCCL".
func sayNeeds(ns []need) string {
	words := make([]string, len(ns))
	for i, n := range ns {
		words[i] = n.words
	}
	return strings.Join(words, ", ")
}

// sayNeedsBriefly joins needs without what this machine has: "2 GPUs, nvcc, NCCL".
func sayNeedsBriefly(ns []need) string {
	words := make([]string, len(ns))
	for i, n := range ns {
		words[i] = n.brief
	}
	return strings.Join(words, ", ")
}
