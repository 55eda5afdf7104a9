package build

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const defaultArch = "sm_90"

// Options that take their value as the next argument (nvcc and gcc spellings).
var takesValue = map[string]bool{
	"-Xlinker": true, "-Xcompiler": true, "-Xptxas": true, "-Xnvlink": true, "-Xarchive": true,
	"-gencode": true, "-arch": true, "-code": true, "-x": true, "-I": true, "-L": true, "-l": true,
	"-D": true, "-U": true, "-include": true, "-isystem": true, "-ccbin": true, "-o": true,
	"--generate-code": true, "--gpu-architecture": true, "--gpu-code": true, "--compiler-bindir": true,
	"--linker-options": true, "--compiler-options": true,
}

// flagGroups splits manifest flags into whole options (an option and its separate value
// stay together).
func flagGroups(flags []string) [][]string {
	var out [][]string
	for i := 0; i < len(flags); i++ {
		g := []string{flags[i]}
		if takesValue[flags[i]] && i+1 < len(flags) {
			g = append(g, flags[i+1])
			i++
		}
		out = append(out, g)
	}
	return out
}

func isLinkFlag(opt string) bool {
	if opt == "-lineinfo" || opt == "-lto" {
		return false // nvcc options, not libraries
	}
	for _, p := range []string{"-l", "-L", "-Wl,", "-Xlinker", "--linker-options", "-Xnvlink", "-rdynamic", "-static"} {
		if strings.HasPrefix(opt, p) {
			return true
		}
	}
	return false
}

func isArchFlag(opt string) bool {
	for _, p := range []string{"-arch", "-gencode", "--gpu-architecture", "--generate-code", "-code", "--gpu-code"} {
		if strings.HasPrefix(opt, p) {
			return true
		}
	}
	return false
}

// splitFlags separates manifest flags into compile flags and link flags. Architecture flags
// go to both: a relocatable-device-code link needs them again.
func splitFlags(flags []string) (compile, link []string, hasOpt, hasArch, hasStd bool) {
	for _, g := range flagGroups(flags) {
		opt := g[0]
		switch {
		case isLinkFlag(opt):
			link = append(link, g...)
			continue
		case isArchFlag(opt):
			hasArch = true
			link = append(link, g...)
		case strings.HasPrefix(opt, "-O") || strings.HasPrefix(opt, "--optimize"):
			hasOpt = true
		case strings.HasPrefix(opt, "-std") || strings.HasPrefix(opt, "--std"):
			hasStd = true
		}
		compile = append(compile, g...)
	}
	return
}

// forNVCC rewrites gcc-style arguments (as mpicc --showme prints them) into nvcc's syntax.
func forNVCC(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-pthread" || a == "-fopenmp" || a == "-rdynamic":
			out = append(out, "-Xcompiler", a)
		case strings.HasPrefix(a, "-Wl,"):
			out = append(out, "-Xlinker", a[len("-Wl,"):])
		case takesValue[a] && i+1 < len(args):
			out = append(out, a, args[i+1])
			i++
		case strings.HasPrefix(a, "-f") || strings.HasPrefix(a, "-m") ||
			strings.HasPrefix(a, "-W") && !strings.HasPrefix(a, "-Wno-deprecated-gpu-targets"):
			out = append(out, "-Xcompiler", a)
		default:
			out = append(out, a)
		}
	}
	return out
}

// plan is everything a build's commands share.
type plan struct {
	kind     string
	compiler string
	toolID   []string // identity of the compiler: path, version, binaries' size and time
	// compile is the option list for a source with the Request's Headers (without source,
	// output and language): pre, "-I" each header directory, post.
	compile []string
	// pre and post are the options before and after the include directories; keyPre and
	// keyPost the same for the key (the directories are placeholders there, so that the same
	// files elsewhere give the same key).
	pre, post, keyPre, keyPost []string
	hasStd                     bool
	link                       []string // after the objects
	libPrints                  []string // fingerprints of the libraries linked
	headers                    []string // absolute Headers directories
	runtimeDirs                []string
}

func newPlan(req *Request) (*plan, error) {
	tc := req.Toolchain
	if tc == nil {
		tc = &Toolchain{}
	}
	p := &plan{kind: req.Kind}
	switch req.Kind {
	case "cuda":
		p.compiler = tc.NVCC
		if p.compiler == "" {
			p.compiler = "nvcc"
		}
	case "c":
		p.compiler = tc.CC
		if p.compiler == "" {
			p.compiler = "cc"
		}
	default:
		return nil, fmt.Errorf("build: unknown kind %q (want cuda or c)", req.Kind)
	}
	path, err := lookPath(p.compiler)
	if err != nil {
		return nil, fmt.Errorf("build: compiler %s: %w", p.compiler, err)
	}
	p.compiler = path
	p.toolID = []string{path, tc.Version, statDigest(path)}
	if req.Kind == "cuda" {
		// nvcc hands host code to the host compiler on PATH.
		for _, host := range []string{"g++", "gcc"} {
			if hp, err := lookPath(host); err == nil {
				p.toolID = append(p.toolID, statDigest(hp))
			}
		}
	}

	compileFlags, linkFlags, hasOpt, hasArch, hasStd := splitFlags(req.Flags)
	p.hasStd = hasStd
	rdc := req.RDC
	if slices.Contains(req.Libs, "nvshmem") {
		// NVSHMEM's device API lives in a static archive of relocatable device code
		// (libnvshmem_device.a): every object must be relocatable, and the link must run
		// nvcc's device link over them and the archive.
		if req.Kind != "cuda" {
			return nil, fmt.Errorf("build: library nvshmem needs kind cuda (nvcc), not %q", req.Kind)
		}
		rdc = true
	}
	var common, keyCommon []string
	both := func(args ...string) {
		common = append(common, args...)
		keyCommon = append(keyCommon, args...)
	}
	if req.Kind == "cuda" {
		if !hasArch {
			arch := req.Arch
			if arch == "" {
				arch = tc.Arch
			}
			if arch == "" {
				arch = defaultArch
			}
			both("-arch=" + arch)
			linkFlags = append([]string{"-arch=" + arch}, linkFlags...)
		}
		if rdc {
			both("-rdc=true")
			linkFlags = append([]string{"-rdc=true"}, linkFlags...)
		}
	}
	if !hasOpt {
		both("-O3")
	}
	for _, h := range req.Headers {
		abs, err := filepath.Abs(h)
		if err != nil {
			return nil, err
		}
		p.headers = append(p.headers, abs)
	}
	p.pre, p.keyPre = slices.Clone(common), slices.Clone(keyCommon)
	common, keyCommon = nil, nil
	// pip wheels of CUDA keep CCCL (thrust, cub, libcu++) in include/cccl and the runtime
	// libraries in lib, where nvcc's own profile does not look.
	var cudaLinkDirs []string
	if req.Kind == "cuda" {
		top := filepath.Dir(filepath.Dir(path))
		if st, err := os.Stat(filepath.Join(top, "include", "cccl")); err == nil && st.IsDir() {
			both("-I" + filepath.Join(top, "include", "cccl"))
		}
		for _, lib := range []string{"lib64", "lib"} {
			if _, err := os.Stat(filepath.Join(top, lib, "libcudart_static.a")); err == nil {
				cudaLinkDirs = append(cudaLinkDirs, "-L"+filepath.Join(top, lib))
			}
		}
	}

	var link []string
	link = append(link, cudaLinkDirs...)
	for _, name := range req.Libs {
		lib, known := tc.Libs[name]
		var args []string
		switch name {
		case "pthread":
			if req.Kind == "cuda" {
				args = append(args, "-Xcompiler", "-pthread")
			}
			args = append(args, "-lpthread")
		case "cuda":
			if len(lib.LinkArgs) == 0 {
				args = append(args, "-lcuda")
			}
		case "nccl":
			if len(lib.LinkArgs) == 0 {
				args = append(args, "-lnccl")
			}
			// The harness opens NCCL's watch with dlopen (csrc/mgpu_nccl.cu); libdl is part
			// of the C library since glibc 2.34, a library of its own before.
			args = append(args, "-ldl")
		case "mpi":
			if !known {
				return nil, fmt.Errorf("build: library %q is not in the toolchain (the probe did not find it)", name)
			}
			// mpi.h pulls in MPI's C++ bindings when a C++ (or CUDA) source includes it and
			// the MPI was built with them (Debian's Open MPI is); they need libmpi_cxx, which
			// `mpicc --showme:link` does not name, and MPI-3 removed them. The C API is all
			// the course uses.
			both("-DOMPI_SKIP_MPICXX=1", "-DMPICH_SKIP_MPICXX=1")
		default:
			if !known {
				return nil, fmt.Errorf("build: library %q is not in the toolchain (the probe did not find it)", name)
			}
		}
		for _, inc := range lib.Include {
			both("-I" + inc)
			p.libPrints = append(p.libPrints, dirHeaders(inc))
		}
		var libArgs []string
		for _, d := range lib.LibDirs {
			libArgs = append(libArgs, "-L"+d)
		}
		libArgs = append(libArgs, lib.LinkArgs...)
		libArgs = append(libArgs, args...)
		if req.Kind == "cuda" {
			libArgs = forNVCC(libArgs)
		}
		link = append(link, libArgs...)
		p.libPrints = append(p.libPrints, libFiles(lib.LibDirs, libArgs)...)
		p.runtimeDirs = append(p.runtimeDirs, lib.RuntimeDirs...)
	}
	if req.Kind == "c" {
		link = append(link, "-lm", "-lpthread")
	}
	// Libraries outside the loader's search path (pip wheels, $NVSHMEM_HOME, ...) are found
	// through a run path baked into the program, so that it also runs by hand; RuntimeEnv
	// still names them for launchers that set the environment.
	link = append(link, rpathArgs(req.Kind, p.runtimeDirs)...)
	link = append(link, hardeningArgs(req.Kind)...)
	p.post = append(common, compileFlags...)
	p.keyPost = append(keyCommon, compileFlags...)
	p.compile = p.argsWith(p.headers, nil)
	p.link = append(linkFlags, link...)
	return p, nil
}

// hardeningArgs link every program with full RELRO: relocations are resolved at start-up
// (-z now) and the GOT is then remapped read-only (-z relro), so code that runs later (the
// learner's) cannot redirect calls into the harness or the libraries by writing GOT entries.
func hardeningArgs(kind string) []string {
	if kind == "cuda" {
		return []string{"-Xlinker", "-z,relro,-z,now"}
	}
	return []string{"-Wl,-z,relro,-z,now"}
}

// rpathArgs are the link options that put dirs in the program's run path (DT_RUNPATH with
// today's linkers: searched after LD_LIBRARY_PATH). nvcc and the compiler drivers split
// option lists at commas, so a folder whose name has one is left to LD_LIBRARY_PATH.
func rpathArgs(kind string, dirs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" || seen[d] || strings.Contains(d, ",") {
			continue
		}
		seen[d] = true
		if kind == "cuda" {
			out = append(out, "-Xlinker", "-rpath", "-Xlinker", d)
		} else {
			out = append(out, "-Wl,-rpath,"+d)
		}
	}
	return out
}

// language returns the options that set a source's language.
func (p *plan) language(src string) []string {
	ext := strings.ToLower(filepath.Ext(src))
	std := func(s string) []string {
		if p.hasStd {
			return nil
		}
		return []string{s}
	}
	if p.kind == "cuda" {
		switch ext {
		case ".c":
			return []string{"-x", "c"}
		case ".cu":
			return std("-std=c++17")
		default:
			return append([]string{"-x", "c++"}, std("-std=c++17")...)
		}
	}
	return nil
}

// argsWith is the option list for a source with these include directories and own flags.
func (p *plan) argsWith(headers, flags []string) []string {
	args := slices.Clone(p.pre)
	for _, h := range headers {
		args = append(args, "-I"+h)
	}
	args = append(args, p.post...)
	return append(args, flags...)
}

// keyArgs is argsWith for the key: the include directories by position.
func (p *plan) keyArgs(headers, flags []string) []string {
	args := slices.Clone(p.keyPre)
	for i := range headers {
		args = append(args, fmt.Sprintf("-I<headers %d>", i))
	}
	args = append(args, p.keyPost...)
	return append(args, flags...)
}

// compileArgs is the command line compiling o's source to out.
func (p *plan) compileArgs(o *object, out string) []string {
	args := []string{"-c"}
	args = append(args, p.language(o.abs)...)
	args = append(args, p.argsWith(o.headers, o.src.Flags)...)
	return append(args, o.abs, "-o", out)
}

// linkArgs is the command line linking objs into out.
func (p *plan) linkArgs(objs []string, out string) []string {
	args := append([]string{}, objs...)
	args = append(args, "-o", out)
	return append(args, p.link...)
}
