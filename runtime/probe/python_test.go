package probe

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	baseLine = `MGPU_PROBE_BASE {"version": "3.12.3", "executable": "/usr/bin/python3", "site": ["/venv/site-packages"], "nvidia": ["/venv/site-packages/nvidia"]}`
	fullLine = `MGPU_PROBE {"version": "3.12.3", "executable": "/usr/bin/python3", "site": ["/venv/site-packages"], "nvidia": ["/venv/site-packages/nvidia"], ` +
		`"torch": {"version": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.27.7", "cuda_available": true, "device_count": 4}}`
)

// A run cut short after the base line keeps what it names, and says torch never reported.
func TestReadPythonBaseLineOnly(t *testing.T) {
	timeout := fmt.Errorf("%w after 20s", errTimeout)
	py := &Python{Path: "/usr/bin/python3"}
	if err := readPython(baseLine+"\n", timeout, py); err != errTorchUnfinished {
		t.Fatalf("err = %v, want errTorchUnfinished", err)
	}
	if py.Version != "3.12.3" || !reflect.DeepEqual(py.SiteDirs, []string{"/venv/site-packages"}) ||
		!reflect.DeepEqual(py.NvidiaDirs, []string{"/venv/site-packages/nvidia"}) || py.Torch != nil {
		t.Fatalf("python %+v", py)
	}
	if py.TorchError != "import torch did not finish: timed out after 20s" {
		t.Errorf("torch error %q", py.TorchError)
	}
	if stage(errTorchUnfinished) != "during import torch (its site-packages were read)" {
		t.Errorf("stage %q", stage(errTorchUnfinished))
	}

	// An interpreter that exits without the final line (import torch calling os._exit) says so too.
	py = &Python{Path: "/usr/bin/python3"}
	if err := readPython(baseLine+"\n", nil, py); err != errTorchUnfinished || !strings.Contains(py.TorchError, "exited without reporting") {
		t.Fatalf("err %v, python %+v", err, py)
	}
}

// With both lines the final one is read, as before the base line existed.
func TestReadPythonBothLines(t *testing.T) {
	py := &Python{Path: "/usr/bin/python3"}
	if err := readPython(baseLine+"\n"+fullLine+"\n", nil, py); err != nil {
		t.Fatal(err)
	}
	want := &Torch{Version: "2.11.0+cu130", CUDA: "13.0", NCCL: "2.27.7", CUDAAvailable: true, DeviceCount: 4}
	if !reflect.DeepEqual(py.Torch, want) || py.TorchError != "" || len(py.NvidiaDirs) != 1 || py.Version != "3.12.3" {
		t.Fatalf("python %+v torch %+v", py, py.Torch)
	}
}

func TestReadPythonGarbage(t *testing.T) {
	for _, out := range []string{"", "Python 2.7.18\n", "MGPU_PROBE_BASEMENT {}\n"} {
		py := &Python{Path: "/usr/bin/python3"}
		if err := readPython(out, nil, py); err != errNoProbeLine {
			t.Errorf("%q: err = %v, want errNoProbeLine", out, err)
		}
		if py.Version != "" || py.NvidiaDirs != nil || py.TorchError != "" {
			t.Errorf("%q: python %+v", out, py)
		}
	}
	if stage(errNoProbeLine) != "before it listed its site-packages" {
		t.Errorf("stage %q", stage(errNoProbeLine))
	}
}

func TestPythonTimedOut(t *testing.T) {
	timedOut := "/usr/bin/python3" + pythonProbe + "timed out after 20s, before it listed its site-packages"
	for _, tc := range []struct {
		name                 string
		py                   *Python
		problems             []string
		timedOut, unsearched bool
	}{
		{"no python", nil, []string{timedOut}, false, false},
		{"fine", &Python{Path: "/usr/bin/python3", Version: "3.12.3"}, nil, false, false},
		{"another probe timed out", &Python{Path: "/usr/bin/python3"}, []string{"nvcc --version: timed out after 5s"}, false, false},
		{"crashed", &Python{Path: "/usr/bin/python3"}, []string{"/usr/bin/python3" + pythonProbe + "signal: killed, before it listed its site-packages"}, false, false},
		{"in import torch", &Python{Path: "/usr/bin/python3", Version: "3.12.3"}, []string{timedOut}, true, false},
		{"before the base line", &Python{Path: "/usr/bin/python3"}, []string{timedOut}, true, true},
	} {
		f := &Facts{Python: tc.py, Problems: tc.problems}
		if f.PythonTimedOut() != tc.timedOut || f.PipWheelsUnsearched() != tc.unsearched {
			t.Errorf("%s: PythonTimedOut %v PipWheelsUnsearched %v", tc.name, f.PythonTimedOut(), f.PipWheelsUnsearched())
		}
	}
}

// The real interpreter must flush the base line before importing torch: a torch that hangs
// (a fake one on PYTHONPATH) still leaves the site folders behind when the run is killed.
func TestPythonScriptBaseLineSurvivesAHangingTorch(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 here")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "torch.py"), []byte("import time\ntime.sleep(100)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(context.Background(), command{path: python, args: []string{"-c", pythonScript}, timeout: 3 * time.Second,
		env: []string{"PYTHONPATH=" + dir, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED="}}) // buffered, as in a plain shell
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v (output %q)", err, out)
	}
	py := &Python{Path: python}
	if perr := readPython(out, err, py); perr != errTorchUnfinished {
		t.Fatalf("%v: %q", perr, out)
	}
	if !strings.HasPrefix(py.Version, "3.") || len(py.SiteDirs) == 0 || !strings.HasPrefix(py.TorchError, "import torch did not finish: timed out") {
		t.Fatalf("python %+v", py)
	}
}
