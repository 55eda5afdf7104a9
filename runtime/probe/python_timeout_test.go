package probe_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/probe/probetest"
)

// slowPython installs a python3 that prints lines ("" for none) and then hangs, as one whose
// `import torch` outlasts the probe on a busy machine.
func slowPython(m *probetest.Machine, lines string) {
	out := m.Put("outputs/python3.txt", lines)
	m.Exec(filepath.Join(m.Bin, "python3"), "#!/bin/sh\n/bin/cat '"+out+"'\n/bin/sleep 100\n")
}

// A Python probe that times out in import torch keeps the interpreter's nvidia folders, so the
// NVSHMEM and NCCL wheels there are found; the facts are not cached.
func TestPythonTimeoutKeepsPipWheels(t *testing.T) {
	m := probetest.New(t)
	site := filepath.Join(m.Root, "venv", "site-packages")
	nvidia := filepath.Join(site, "nvidia")
	m.PipNVSHMEM(nvidia, "3.4.5")
	m.PipNCCL(nvidia, "2.27.5")
	slowPython(m, `MGPU_PROBE_BASE {"version": "3.12.3", "site": ["`+site+`"], "nvidia": ["`+nvidia+`"]}`+"\n")
	opts := m.Options()
	opts.PythonTimeout = 300 * time.Millisecond
	opts.NoCache, opts.CacheDir = false, t.TempDir()
	f := discover(t, opts)

	py := f.Python
	if py == nil || py.Version != "3.12.3" || len(py.NvidiaDirs) != 1 || py.NvidiaDirs[0] != nvidia || py.Torch != nil {
		t.Fatalf("python = %+v", py)
	}
	if py.TorchError != "import torch did not finish: timed out after 300ms" {
		t.Errorf("torch error %q", py.TorchError)
	}
	if f.NVSHMEM == nil || f.NVSHMEM.Source != "pip" || f.NVSHMEM.Include != filepath.Join(nvidia, "nvshmem", "include") {
		t.Errorf("nvshmem = %+v", f.NVSHMEM)
	}
	if f.NCCL == nil || f.NCCL.Source != "pip" {
		t.Errorf("nccl = %+v", f.NCCL)
	}
	want := filepath.Join(m.Bin, "python3") + " (the Python probe): timed out after 300ms, during import torch (its site-packages were read)"
	if len(f.Problems) != 1 || f.Problems[0] != want {
		t.Errorf("problems %q, want %q", f.Problems, want)
	}
	if !f.PythonTimedOut() || f.PipWheelsUnsearched() {
		t.Errorf("PythonTimedOut %v PipWheelsUnsearched %v", f.PythonTimedOut(), f.PipWheelsUnsearched())
	}
	if _, err := os.Stat(filepath.Join(opts.CacheDir, "facts.json")); !os.IsNotExist(err) {
		t.Errorf("facts of a timed-out probe were cached (%v)", err)
	}
}

// A Python probe that times out before its first line leaves the wheels unsearched, and says so.
func TestPythonTimeoutBeforeTheBaseLine(t *testing.T) {
	m := probetest.New(t)
	m.PipNVSHMEM(filepath.Join(m.Root, "venv", "site-packages", "nvidia"), "3.4.5")
	slowPython(m, "")
	opts := m.Options()
	opts.PythonTimeout = 300 * time.Millisecond
	f := discover(t, opts)
	if f.Python == nil || f.Python.Version != "" || f.Python.NvidiaDirs != nil || f.NVSHMEM != nil {
		t.Fatalf("python %+v nvshmem %+v", f.Python, f.NVSHMEM)
	}
	if len(f.Problems) != 1 || !strings.HasSuffix(f.Problems[0], "(the Python probe): timed out after 300ms, before it listed its site-packages") {
		t.Errorf("problems %q", f.Problems)
	}
	if !f.PythonTimedOut() || !f.PipWheelsUnsearched() {
		t.Errorf("PythonTimedOut %v PipWheelsUnsearched %v", f.PythonTimedOut(), f.PipWheelsUnsearched())
	}
}
