package probe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// stdLibDirs are where distributions put shared libraries.
var stdLibDirs = []string{
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
	"/usr/local/lib", "/usr/local/cuda/lib64",
}

// systemDirs are searched by compilers and the dynamic loader without being named; Toolchain
// leaves them out of -I, -L and LD_LIBRARY_PATH (an explicit -I/usr/include breaks C++'s
// #include_next).
var systemDirs = map[string]bool{
	"/usr/include": true, "/usr/local/include": true,
	"/usr/lib": true, "/usr/lib64": true, "/usr/local/lib": true,
	"/usr/lib/x86_64-linux-gnu": true, "/usr/lib/aarch64-linux-gnu": true,
	"/lib": true, "/lib64": true, "/lib/x86_64-linux-gnu": true, "/lib/aarch64-linux-gnu": true,
}

// findLib finds a shared library by file name: the ldconfig cache, then the usual folders.
func (p *prober) findLib(ctx context.Context, names ...string) string {
	p.ldOnce.Do(func() { p.ldLibs = p.ldconfig(ctx) })
	for _, n := range names {
		if path := p.ldLibs[n]; path != "" && exists(path) {
			return path
		}
	}
	for _, dir := range stdLibDirs {
		for _, n := range names {
			if path := filepath.Join(p.sys(dir), n); exists(path) {
				return path
			}
		}
	}
	return ""
}

// ldconfig reads `ldconfig -p`: library file name -> path (the first listed wins).
func (p *prober) ldconfig(ctx context.Context) map[string]string {
	libs := map[string]string{}
	if p.opts.SystemRoot != "" {
		return libs
	}
	path, err := exec.LookPath("ldconfig")
	if err != nil {
		for _, c := range []string{"/sbin/ldconfig", "/usr/sbin/ldconfig"} {
			if isExec(c) {
				path = c
				break
			}
		}
	}
	if path == "" {
		return libs
	}
	out, ok := p.exec(ctx, path, "-p")
	if !ok {
		return libs
	}
	for name, path := range parseLdconfig(out) {
		libs[name] = path
	}
	return libs
}

// parseLdconfig reads lines like "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/.../libnccl.so.2".
func parseLdconfig(out string) map[string]string {
	libs := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, "=> ")
		if !ok {
			continue
		}
		if _, dup := libs[name]; !dup {
			libs[name] = strings.TrimSpace(path)
		}
	}
	return libs
}

var defineRE = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\S+)`)

// defines reads the simple #define NAME VALUE lines of a header.
func defines(path string) map[string]string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	d := map[string]string{}
	for _, m := range defineRE.FindAllStringSubmatch(string(b), -1) {
		if _, dup := d[m[1]]; !dup {
			d[m[1]] = strings.Trim(m[2], `"()`)
		}
	}
	return d
}

// versionOf joins three defines as "major.minor.patch" ("" unless major and minor are there).
func versionOf(d map[string]string, major, minor, patch string) string {
	if d[major] == "" || d[minor] == "" {
		return ""
	}
	v := d[major] + "." + d[minor]
	if d[patch] != "" {
		v += "." + d[patch]
	}
	return v
}

// ncclVersion reads NCCL_MAJOR/MINOR/PATCH from nccl.h.
func ncclVersion(header string) string {
	return versionOf(defines(header), "NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")
}

// linkName is the -l argument for a library file in dir: "-lname" when the unversioned
// libname.so is there, else "-l:" and the versioned file.
func linkName(dir, base string) []string {
	if exists(filepath.Join(dir, "lib"+base+".so")) {
		return []string{"-l" + base}
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "lib"+base+".so.*"))
	sort.Strings(matches)
	if len(matches) > 0 {
		return []string{"-l:" + filepath.Base(matches[0])}
	}
	return []string{"-l" + base}
}

// nccl finds NCCL: system-wide first, then $NCCL_HOME, then pip wheels (see pipRoots).
func (p *prober) nccl(ctx context.Context, pip []string) *Library {
	if pip == nil {
		for _, inc := range []string{"/usr/include", "/usr/local/include", "/usr/local/cuda/include"} {
			h := filepath.Join(p.sys(inc), "nccl.h")
			if !exists(h) {
				continue
			}
			lib := p.findLib(ctx, "libnccl.so", "libnccl.so.2")
			if lib == "" {
				p.problem("%s is there but no libnccl.so was found (ldconfig -p, %s)", h, strings.Join(stdLibDirs, ", "))
				break
			}
			dir := filepath.Dir(lib)
			return &Library{Version: ncclVersion(h), Source: "system", Include: filepath.Dir(h), LibDir: dir, LinkArgs: linkName(dir, "nccl")}
		}
		if home := os.Getenv("NCCL_HOME"); home != "" {
			if l := p.ncclAt(home, "env"); l != nil {
				return l
			}
			p.problem("NCCL_HOME=%s holds no include/nccl.h with lib/libnccl.so*", home)
		}
	}
	for _, root := range p.pipRoots(pip) {
		if l := p.ncclAt(filepath.Join(root, "nccl"), "pip"); l != nil {
			return l
		}
	}
	return nil
}

// ncclAt is NCCL under a prefix with include/ and lib/ (or lib64/).
func (p *prober) ncclAt(home, source string) *Library {
	h := filepath.Join(home, "include", "nccl.h")
	if !exists(h) {
		return nil
	}
	for _, ld := range []string{"lib", "lib64"} {
		dir := filepath.Join(home, ld)
		if m, _ := filepath.Glob(filepath.Join(dir, "libnccl.so*")); len(m) > 0 {
			return &Library{Version: ncclVersion(h), Source: source, Include: filepath.Dir(h), LibDir: dir, LinkArgs: linkName(dir, "nccl")}
		}
	}
	return nil
}

// nvshmem finds NVSHMEM: $NVSHMEM_HOME, then system packages, then pip wheels.
func (p *prober) nvshmem(pip []string) *Library {
	if pip == nil {
		if home := os.Getenv("NVSHMEM_HOME"); home != "" {
			if l := nvshmemAt(filepath.Join(home, "include"), []string{filepath.Join(home, "lib"), filepath.Join(home, "lib64")}, "env"); l != nil {
				return l
			}
			p.problem("NVSHMEM_HOME=%s holds no include/nvshmem.h with lib/libnvshmem_host.so* and libnvshmem_device.a", home)
		}
		// Distribution packages: /usr/include/nvshmem_<cuda>/ and /usr/lib/<triplet>/nvshmem/<cuda>/.
		incs := []string{p.sys("/usr/include")}
		more, _ := filepath.Glob(p.sys("/usr/include/nvshmem_*"))
		incs = append(incs, more...)
		var libs []string
		for _, d := range stdLibDirs {
			libs = append(libs, p.sys(d))
			more, _ := filepath.Glob(filepath.Join(p.sys(d), "nvshmem", "*"))
			libs = append(libs, more...)
		}
		for _, inc := range incs {
			if l := nvshmemAt(inc, libs, "system"); l != nil {
				return l
			}
		}
	}
	for _, root := range p.pipRoots(pip) {
		home := filepath.Join(root, "nvshmem")
		if l := nvshmemAt(filepath.Join(home, "include"), []string{filepath.Join(home, "lib")}, "pip"); l != nil {
			return l
		}
	}
	return nil
}

// nvshmemAt is NVSHMEM with its headers in inc and its libraries in the first of libDirs that
// holds both the host library and the device archive.
func nvshmemAt(inc string, libDirs []string, source string) *Library {
	if !exists(filepath.Join(inc, "nvshmem.h")) {
		return nil
	}
	for _, dir := range libDirs {
		dev := filepath.Join(dir, "libnvshmem_device.a")
		host, _ := filepath.Glob(filepath.Join(dir, "libnvshmem_host.so*"))
		if len(host) == 0 || !exists(dev) {
			continue
		}
		args := append(linkName(dir, "nvshmem_host"), dev)
		return &Library{Version: nvshmemVersion(inc), Source: source, Include: inc, LibDir: dir, LinkArgs: args}
	}
	return nil
}

// nvshmemVersion reads NVSHMEM_VENDOR_{MAJOR,MINOR,PATCH}_VERSION from the headers that
// define them (non_abi/nvshmem_version.h in 3.x, nvshmem_constants.h and version.h before).
func nvshmemVersion(inc string) string {
	for _, h := range []string{
		"non_abi/nvshmem_version.h", "nvshmem_version.h", "device_host_transport/nvshmem_constants.h",
		"common/nvshmem_constants.h", "nvshmem_constants.h", "nvshmem.h",
	} {
		d := defines(filepath.Join(inc, h))
		if v := versionOf(d, "NVSHMEM_VENDOR_MAJOR_VERSION", "NVSHMEM_VENDOR_MINOR_VERSION", "NVSHMEM_VENDOR_PATCH_VERSION"); v != "" {
			return v
		}
	}
	return ""
}
