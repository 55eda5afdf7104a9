package probe

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// pythonScript prints one JSON object: the interpreter, its site folders, the nvidia namespace
// package's folders (pip wheels), and what `import torch` reports. Every torch question is
// guarded: a broken CUDA setup must not lose the rest.
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
	out, ok := p.execWith(ctx, command{path: path, args: []string{"-c", pythonScript}, timeout: p.opts.PythonTimeout,
		env: []string{"PYTHONDONTWRITEBYTECODE=1"}})
	if ok {
		if err := parsePython(out, py); err != nil {
			p.problem("%s: %v", path, err)
		}
	}
	py.Torchrun = torchrun(path)
	return py
}

// parsePython reads the probe line of pythonScript's output into py.
func parsePython(out string, py *Python) error {
	var line string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "MGPU_PROBE "); ok {
			line = v
		}
	}
	if line == "" {
		return errNoProbeLine
	}
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

const errNoProbeLine = probeError("printed no MGPU_PROBE line (is it Python 3?)")

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
