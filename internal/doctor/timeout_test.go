package doctor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe/probetest"
)

// probeSlowPython probes m with a python3 that prints lines ("" for none) and then hangs past
// a short Python time limit, as on a machine too busy to import torch in time.
func probeSlowPython(t *testing.T, m *probetest.Machine, lines string) *probe.Facts {
	t.Helper()
	out := m.Put("outputs/python3.txt", lines)
	m.Exec(filepath.Join(m.Bin, "python3"), "#!/bin/sh\n/bin/cat '"+out+"'\n/bin/sleep 100\n")
	opts := m.Options()
	opts.PythonTimeout = 300 * time.Millisecond
	f, err := probe.Discover(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const (
	unsearched = "; but the Python probe of %s timed out, so pip wheels in its site-packages were not searched"
	refresh    = "the machine may have been too busy for the probe: run `mgpu-learn doctor --refresh` to probe again"
)

// A Python probe that timed out before listing its site-packages leaves NVSHMEM, NCCL and nvcc
// there unsearched: the reasons say so rather than that none is installed.
func TestReasonsWhenThePythonProbeTimedOut(t *testing.T) {
	m := probetest.New(t)
	m.NvidiaSMI([]probetest.GPU{probetest.H200, probetest.H200}, "NV18", "OK")
	m.PipNVSHMEM(filepath.Join(m.Root, "venv", "site-packages", "nvidia"), "3.4.5")
	f := probeSlowPython(t, m, "")
	note := strings.Replace(unsearched, "%s", filepath.Join(m.Bin, "python3"), 1)

	m4 := row(t, Build(f, module4()), "module4")
	if needs(m4.Missing) != "nvcc,nvshmem" {
		t.Fatalf("missing %+v", m4.Missing)
	}
	for _, r := range m4.Missing {
		if !strings.HasSuffix(r.What, " pip wheels"+note) || !strings.HasPrefix(r.Fix, refresh+"; if it is still missing, run scripts/install-cuda-tools.sh") {
			t.Errorf("%s: what %q fix %q", r.Need, r.What, r.Fix)
		}
	}
	rs := Unmet(f, course.Requirements{GPUs: 2, Libs: []string{"nccl", "torch"}}, course.Launch{Launcher: "local", Ranks: "all"})
	if needs(rs) != "torch,nccl" || !strings.HasSuffix(rs[1].What, "in $NCCL_HOME or in pip wheels"+note) {
		t.Fatalf("reasons %+v", rs)
	}
	if rs[0].What != "needs PyTorch; whether "+filepath.Join(m.Bin, "python3")+" can import torch is unknown: the Python probe timed out before torch reported" ||
		rs[0].Fix != refresh {
		t.Errorf("torch %+v", rs[0])
	}

	// NVSHMEM_HOME's own wording gets the same remark.
	f.Env = map[string]string{"NVSHMEM_HOME": filepath.Join(m.Root, "nowhere")}
	if r := nvshmemMissing(f); !strings.Contains(r.What, "holds no include/nvshmem.h") || !strings.HasSuffix(r.What, note) {
		t.Errorf("NVSHMEM_HOME reason %+v", r)
	}
}

// When the site-packages were listed (the probe timed out only in import torch), or no Python
// probe timed out, the wheels were searched and the reasons stay as they were.
func TestReasonsWithoutAnUnsearchedWheel(t *testing.T) {
	plain := nvshmemMissing(&probe.Facts{})
	if strings.Contains(plain.What, "timed out") || strings.Contains(plain.Fix, "--refresh") {
		t.Fatalf("plain reason %+v", plain)
	}

	m := probetest.New(t)
	m.NvidiaSMI([]probetest.GPU{probetest.H200, probetest.H200}, "NV18", "OK")
	m.NVCC("13.0.88")
	site := filepath.Join(m.Root, "venv", "site-packages")
	f := probeSlowPython(t, m, `MGPU_PROBE_BASE {"version": "3.12.3", "site": ["`+site+`"], "nvidia": []}`+"\n")
	m4 := row(t, Build(f, module4()), "module4")
	if needs(m4.Missing) != NeedNVSHMEM || m4.Missing[0] != plain {
		t.Errorf("missing %+v, want %+v", m4.Missing, plain)
	}
	// torch did time out, though: it is unknown, not missing.
	rs := Unmet(f, course.Requirements{Libs: []string{"torch"}}, course.Launch{Launcher: "torchrun", Ranks: "2"})
	if needs(rs) != NeedTorch || !strings.Contains(rs[0].What, "(Python 3.12.3) can import torch is unknown") || rs[0].Fix != refresh {
		t.Errorf("torch %+v", rs)
	}

	// Another probe's timeout says nothing about the wheels.
	f = &probe.Facts{Python: &probe.Python{Path: "/usr/bin/python3"}, Problems: []string{"nvcc --version: timed out after 5s"}}
	if r := nvshmemMissing(f); r != plain {
		t.Errorf("reason %+v", r)
	}
}
