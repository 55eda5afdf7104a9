package probe

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// pythonScript prints two lines of JSON. The MGPU_PROBE_BASE line (the interpreter, its site
// folders, the nvidia namespace package's folders: pip wheels) comes first and is flushed, since
// `import torch` can outlast the probe's time limit on a busy machine, and the wheels must not be
// lost with it. The MGPU_PROBE line repeats it with what `import torch` reports. Every torch
// question is guarded: a broken CUDA setup must not lose the rest.
const pythonScript = `
import json, sys
r = {"version": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": sys.executable}
try:
    import site
    d = list(site.getsitepackages())
    u = site.getusersitepackages()
    if isinstance(u, str):
        d.append(u)
    r["site"] = d
except Exception:
    pass
try:
    import nvidia
    r["nvidia"] = [str(p) for p in nvidia.__path__]
except Exception:
    pass
print("MGPU_PROBE_BASE " + json.dumps(r), flush=True)
try:
    import torch
except ModuleNotFoundError as e:
    if getattr(e, "name", "") != "torch":
        r["torch_error"] = repr(e)
except BaseException as e:
    r["torch_error"] = repr(e)
else:
    t = {"version": str(torch.__version__), "cuda": torch.version.cuda or ""}
    try:
        v = torch.cuda.nccl.version()
        t["nccl"] = ".".join(str(x) for x in v) if isinstance(v, (tuple, list)) else str(v)
    except Exception:
        pass
    try:
        t["cuda_available"] = bool(torch.cuda.is_available())
        t["device_count"] = int(torch.cuda.device_count())
    except Exception as e:
        r["torch_error"] = "torch.cuda: " + repr(e)
    r["torch"] = t
print("MGPU_PROBE " + json.dumps(r))
`

// pythonReport is what pythonScript prints.
type pythonReport struct {
	Version    string   `json:"version"`
	Executable string   `json:"executable"`
	Site       []string `json:"site"`
	Nvidia     []string `json:"nvidia"`
	TorchError string   `json:"torch_error"`
	Torch      *struct {
		Version       string `json:"version"`
		CUDA          string `json:"cuda"`
		NCCL          string `json:"nccl"`
		CUDAAvailable bool   `json:"cuda_available"`
		DeviceCount   int    `json:"device_count"`
	} `json:"torch"`
}

// python finds the interpreter ($MGPU_LEARN_PYTHON, else python3 on PATH) and asks it about
// itself and torch, in one subprocess.
func (p *prober) python(ctx context.Context) *Python {
	path := os.Getenv("MGPU_LEARN_PYTHON")
	if path == "" {
		var err error
		if path, err = exec.LookPath("python3"); err != nil {
			return nil
		}
	} else if !isExec(path) {
		p.problem("MGPU_LEARN_PYTHON=%s is not an executable file", path)
		return nil
	}
	py := &Python{Path: path}
	// What the script printed before a timeout or a crash still counts (run returns it).
	out, _, err := run(ctx, command{path: path, args: []string{"-c", pythonScript}, timeout: p.opts.PythonTimeout,
		env: []string{"PYTHONDONTWRITEBYTECODE=1"}})
	perr := readPython(out, err, py)
	switch {
	case err != nil && ctx.Err() == nil:
		p.problem("%s%v, %s", path+pythonProbe, err, stage(perr))
	case err == nil && perr != nil:
		p.problem("%s: %v", path, perr)
	}
	py.Torchrun = torchrun(path)
	return py
}

// pythonProbe follows the interpreter's path in the problem recorded when the probe's run fails
// ("/usr/bin/python3 (the Python probe): timed out after 20s, ..."), where PythonTimedOut finds it.
// The words of errTimeout stay in it, so that saveCache does not keep those facts.
const pythonProbe = " (the Python probe): "

// stage says how far a failed run got, from what readPython made of its output.
func stage(perr error) string {
	switch perr {
	case nil:
		return "after it reported"
	case errTorchUnfinished:
		return "during import torch (its site-packages were read)"
	}
	return "before it listed its site-packages"
}

// readPython is parsePython for a run that may have failed with err: when only the base line
// came, what it names is kept and TorchError says that torch never reported.
func readPython(out string, err error, py *Python) error {
	perr := parsePython(out, py)
	if perr == errTorchUnfinished {
		why := "the interpreter exited without reporting"
		if err != nil {
			why = err.Error()
		}
		py.TorchError = "import torch did not finish: " + why
	}
	return perr
}

// parsePython reads pythonScript's output into py: the MGPU_PROBE line, else the
// MGPU_PROBE_BASE line printed before `import torch`, in which case the error is
// errTorchUnfinished (py holds what the base line says).
func parsePython(out string, py *Python) error {
	var line, base string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "MGPU_PROBE "); ok {
			line = v
		} else if v, ok := strings.CutPrefix(l, "MGPU_PROBE_BASE "); ok {
			base = v
		}
	}
	switch {
	case line != "":
		return readReport(line, py)
	case base != "":
		if err := readReport(base, py); err != nil {
			return err
		}
		return errTorchUnfinished
	}
	return errNoProbeLine
}

// readReport copies one JSON line of pythonScript into py.
func readReport(line string, py *Python) error {
	var r pythonReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return err
	}
	py.Version = r.Version
	py.SiteDirs = r.Site
	py.NvidiaDirs = r.Nvidia
	py.TorchError = r.TorchError
	if r.Torch != nil {
		py.Torch = &Torch{Version: r.Torch.Version, CUDA: r.Torch.CUDA, NCCL: r.Torch.NCCL,
			CUDAAvailable: r.Torch.CUDAAvailable, DeviceCount: r.Torch.DeviceCount}
	}
	if r.Executable != "" && r.Executable != py.Path {
		// Keep the path the user names (a venv's bin/python3), unless it is a shim.
		if strings.Contains(py.Path, "/shims/") {
			py.Path = r.Executable
		}
	}
	return nil
}

type probeError string

func (e probeError) Error() string { return string(e) }

const (
	errNoProbeLine     = probeError("printed no MGPU_PROBE line (is it Python 3?)")
	errTorchUnfinished = probeError("printed MGPU_PROBE_BASE but no MGPU_PROBE line: import torch did not finish")
)

// PythonTimedOut reports whether the Python probe was stopped at its time limit (importing
// torch on a busy machine can take that long): what it did not report is unknown, not missing.
func (f *Facts) PythonTimedOut() bool {
	if f.Python == nil {
		return false
	}
	for _, pr := range f.Problems {
		if strings.Contains(pr, pythonProbe+errTimeout.Error()) {
			return true
		}
	}
	return false
}

// PipWheelsUnsearched reports whether the Python probe timed out before it listed the
// interpreter's site-packages, so the pip wheels there (nvcc, NCCL, NVSHMEM) were not looked
// at. The base line always carries the version: without it nothing was listed.
func (f *Facts) PipWheelsUnsearched() bool {
	return f.PythonTimedOut() && f.Python.Version == ""
}

// torchrun is the torchrun beside the interpreter (same environment), else on PATH.
func torchrun(python string) string {
	if s := sibling(python, "torchrun"); s != "" {
		return s
	}
	if real, err := filepath.EvalSymlinks(python); err == nil {
		if s := sibling(real, "torchrun"); s != "" {
			return s
		}
	}
	s, _ := exec.LookPath("torchrun")
	return s
}
