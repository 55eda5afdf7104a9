package checker

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The integrity rules of the policy stage (docs/protocol.md §4). They hold for every exercise,
// whatever its manifest forbids: the learner's code may not report results itself, run before
// the harness has taken its key, or replace a function the driver or the harness calls. For
// Python, csrc/python/mgpu_policy.py refuses the routes by which a module reaches past its own
// objects.

// Violation rules (Violation.Rule); "" is a call the manifest forbids.
const (
	ruleHarness   = "harness"   // a call of the harness's recording or data API
	ruleDriver    = "driver"    // a use of the driver's own functions or data
	ruleStartup   = "startup"   // code that runs before the harness's start-up
	ruleInterpose = "interpose" // a definition that replaces a function the driver or harness uses
	rulePython    = "python"    // a route mgpu_policy.py refuses
	ruleSide      = "side"      // a C library route between processes or into the system
	ruleOrdering  = "ordering"  // a flag between GPUs with relaxed order (ordering.go)
)

// sideRoutes are C library functions that move data between processes, or reach the machine,
// past the communication library an exercise teaches and past the harness: sockets, shared
// memory and other IPC, pipes, files, new processes, other processes' memory and raw system
// calls. The harness does the run's own I/O, and no exercise's code needs any of them; with
// them ranks on one host could hand each other inputs or results behind NCCL, MPI or
// NVSHMEM (a C rank's counterpart of the Python policy's refusal of stores and RPC). Checked
// in the symbols the learner's objects use (a call or an address taken), so a variable of the
// same name is no violation; "syscall" and "sysenter" are also looked for in the learner's
// code as the compiler saw it, inline assembly included.
var sideRoutes = func() map[string]string {
	m := map[string]string{}
	add := func(why string, names ...string) {
		for _, n := range names {
			m[n] = why
		}
	}
	// With the C library's other exported names for the same calls (__open, _IO_fopen,
	// __connect, _Fork, ...: a red-team pass linked each of them past the plain names).
	add("opens a network or local socket", "socket", "socketpair", "connect", "bind", "listen",
		"accept", "accept4", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
		"send", "recv", "__socket", "__connect", "__bind", "__listen", "__accept", "__send",
		"__recv", "__sendto", "__recvfrom", "__sendmsg", "__recvmsg", "__sendmmsg", "__recvmmsg")
	add("shares memory or messages between processes", "shm_open", "shm_unlink", "shmget",
		"shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
		"semtimedop", "semctl", "sem_open", "sem_unlink", "mq_open", "mq_send", "mq_receive",
		"mq_timedsend", "mq_timedreceive", "memfd_create", "mmap", "mmap64", "__mmap",
		"__mmap64", "pipe", "pipe2", "__pipe", "__pipe2", "mkfifo", "mkfifoat", "vmsplice")
	add("opens files", "open", "open64", "openat", "openat64", "creat", "creat64", "fopen",
		"fopen64", "freopen", "freopen64", "mkstemp", "mkstemp64", "mkostemp", "mkostemp64",
		"mkstemps", "mkstemps64", "mkostemps", "mkostemps64", "mkdtemp", "tmpfile", "tmpfile64",
		"__open", "__open64", "__open_2", "__open64_2", "__openat_2", "__openat64_2",
		"_IO_fopen", "_IO_new_fopen", "posix_openpt", "getpt",
		"openpty", "open_by_handle_at", "name_to_handle_at")
	add("starts processes or reaches into other processes", "fork", "vfork", "clone", "clone3",
		"_Fork", "__fork", "__vfork", "__clone", "__clone2", "__clone3", "daemon", "forkpty",
		"execve", "execveat", "execv", "execvp", "execvpe", "execl", "execlp", "execle",
		"fexecve", "system", "popen", "_IO_popen", "posix_spawn", "posix_spawnp", "ptrace",
		"process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd")
	add("makes raw system calls, which no symbol check can follow", "syscall")
	// NCCL, NVSHMEM, MPI and CUDA read their settings from the environment when they start a
	// communicator or a context, some of them after the learner's code has run: a setting made
	// there (NCCL_MAX_NCHANNELS=1, NCCL_COMM_ID, ...) would reach the driver's baseline and the
	// harness (a red-team pass gave every rank one NCCL id through NCCL_COMM_ID).
	add(envWhy, "setenv", "putenv", "unsetenv", "clearenv", "environ", "__environ", "_environ")
	// Without these, dlsym(RTLD_DEFAULT, "open") would reach every function above with no
	// symbol of its own (lookupForbid adds them, with CUDA's entry-point queries, where an
	// exercise forbids calls; CUDA's stay allowed elsewhere, for the driver API). The second
	// line lists the ways to a loaded library's symbol table without dlsym (a red-team pass
	// found ncclAllReduce through dl_iterate_phdr and the library's GNU hash table); walking
	// memory from an allowed function's address stays open (docs/protocol.md §4).
	add("looks functions up by name at run time, which hides the calls from this check",
		"dlopen", "dlmopen", "dlsym", "dlvsym", "__libc_dlopen_mode", "__libc_dlsym",
		"__libc_dlvsym",
		"dl_iterate_phdr", "dladdr", "dladdr1", "dlinfo", "_dl_find_object", "getauxval",
		"__getauxval", "_r_debug", "_DYNAMIC")
	return m
}()

// fileStreams are the C++ library's file streams: they open files with no C library symbol in
// the learner's object (std::ofstream, std::ifstream, std::fstream and the filebuf beneath).
// Matched in the mangled names, where the class names appear as written.
var fileStreams = []string{"basic_filebuf", "basic_ofstream", "basic_ifstream", "basic_fstream", "__basic_file"}

// fileStream is the C++ file stream class a symbol belongs to ("std::basic_ifstream"), or "".
func fileStream(sym string) string {
	for _, c := range fileStreams {
		if strings.Contains(sym, c) {
			return "std::" + c
		}
	}
	return ""
}

// sideWhy is the report's reason for a side route (one of sideRoutes, or "sysenter").
func sideWhy(name string) string {
	why := sideRoutes[name]
	if why == "" {
		why = sideRoutes["syscall"]
	}
	if why == envWhy {
		return why + ": the environment is the launcher's (docs/protocol.md §1); set what your code needs in its own variables"
	}
	return why + ": ranks communicate only through the library the exercise teaches, and the harness does the run's own input and output"
}

// envWhy is the reason for the side routes that change the environment.
const envWhy = "changes the process's environment, which NCCL, NVSHMEM, MPI and CUDA read when they start, the driver's baseline included"

// learnerHarnessCalls are the harness functions a learner's code may call: the error checks of
// mgpu.h's macros (MGPU_CUDA, MGPU_KERNEL, MGPU_NCCL, MGPU_MPI) and mgpu_fail. Every other
// mgpu_ function records results, makes the run's data or times, which is the driver's part.
var learnerHarnessCalls = map[string]bool{
	"mgpu_check_cuda": true, "mgpu_check_kernel": true, "mgpu_check_nccl": true,
	"mgpu_check_mpi": true, "mgpu_fail": true, "mgpu_where_for": true,
}

var identRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// apiNames are the identifiers of the exercise's support headers: the functions the learner is
// asked to define.
func (k *check) apiNames() map[string]bool {
	names := map[string]bool{}
	for _, rel := range k.e.Support {
		if !isHeader(rel) {
			continue
		}
		data, err := k.e.ReadFile(rel)
		if err != nil {
			continue
		}
		for _, id := range identRE.FindAll(data, -1) {
			names[string(id)] = true
		}
	}
	return names
}

// isAPI says whether a defined symbol is one of the API's functions, as a C name or inside a
// C++ mangled one (<length><name>).
func isAPI(sym string, api map[string]bool) bool {
	if api[sym] {
		return true
	}
	if !strings.HasPrefix(sym, "_Z") {
		return false
	}
	for i := 2; i < len(sym); {
		if sym[i] < '0' || sym[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(sym) && sym[j] >= '0' && sym[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(sym[i:j])
		if err != nil || n <= 0 || j+n > len(sym) {
			i = j
			continue
		}
		if api[sym[j:j+n]] {
			return true
		}
		i = j
	}
	return false
}

// objectIntegrity checks the learner's objects against the integrity rules.
func (k *check) objectIntegrity(prog *program) ([]Violation, int, error) {
	courseUndef := map[string]bool{}
	courseWeak := map[string]*weakDef{}   // weak definitions of the course's objects, by name
	courseOwn := map[string]elf.SymType{} // strong global definitions of the course's objects
	for _, obj := range prog.courseObjects {
		f, err := elf.Open(obj)
		if err != nil {
			return nil, 0, fmt.Errorf("reading %s: %w", obj, err)
		}
		syms, _ := f.Symbols()
		for _, s := range syms {
			switch {
			case s.Name == "":
			case s.Section == elf.SHN_UNDEF:
				courseUndef[unversioned(s.Name)] = true
			case elf.ST_BIND(s.Info) == elf.STB_WEAK:
				if _, ok := courseWeak[unversioned(s.Name)]; !ok {
					courseWeak[unversioned(s.Name)] = symbolContents(f, s)
				}
			case elf.ST_BIND(s.Info) == elf.STB_GLOBAL:
				courseOwn[unversioned(s.Name)] = elf.ST_TYPE(s.Info)
			}
		}
		f.Close()
	}
	api := k.apiNames()
	var vs []Violation
	checked := 0
	for _, lf := range prog.learner {
		if !isSource(lf.Name) || lf.Object == "" {
			continue
		}
		f, err := elf.Open(lf.Object)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the object of %s: %w", lf.Show, err)
		}
		checked++
		at := func(name string) string {
			if line := findInSource(lf.Path, name); line > 0 {
				return fmt.Sprintf("%s:%d", lf.Show, line)
			}
			return lf.Show
		}
		for _, sec := range f.Sections {
			n := sec.Name
			switch {
			case strings.HasPrefix(n, ".preinit_array"), n == ".init",
				strings.HasPrefix(n, ".init_array."), strings.HasPrefix(n, ".ctors."),
				// The type, not the name, is what a linker may go by: a table of start-up
				// functions under another name.
				sec.Type == elf.SHT_PREINIT_ARRAY, sec.Type == elf.SHT_INIT_ARRAY && n != ".init_array":
				word := "constructor"
				switch {
				case strings.HasPrefix(n, ".preinit_array") || n == ".init":
					word = n
				case !strings.HasPrefix(n, ".init_array.") && !strings.HasPrefix(n, ".ctors."):
					word = strings.TrimPrefix(n, ".") // a table under a name of its own
				}
				vs = append(vs, Violation{Rule: ruleStartup, Symbol: n, Found: n, File: at(word),
					Why: "code placed to run before main, ahead of the harness's own start-up, could take what the harness is given; plain constructors are fine, prioritized ones, .preinit_array and .init are not"})
			}
		}
		syms, _ := f.Symbols()
		seen := map[string]bool{}
		seenShown := map[string]bool{}
		for _, s := range syms {
			if s.Name == "" || seen[s.Name] {
				continue
			}
			defined := s.Section != elf.SHN_UNDEF
			bind, typ := elf.ST_BIND(s.Info), elf.ST_TYPE(s.Info)
			name := unversioned(s.Name)
			external := defined && (bind == elf.STB_GLOBAL || bind == elf.STB_WEAK)
			switch {
			case external && name != s.Name:
				seen[s.Name] = true
				vs = append(vs, Violation{Rule: ruleInterpose, Symbol: s.Name, Found: s.Name, File: at(name),
					Why: "a symbol version on a definition (.symver) makes it stand in for the C library's or another library's function of that name; give your function a plain name of its own"})
			case external && reservedName(name):
				seen[s.Name] = true
				vs = append(vs, Violation{Rule: ruleInterpose, Symbol: name, Found: s.Name, File: at(name),
					Why: "names that begin with an underscore belong to the compiler and the C library, whose start-up code calls some of them before main and before the harness (__gmon_start__, __libc_start_main); give your function a name without the leading underscore"})
			case external && courseWeak[name] != nil && !toolchainShared(name) &&
				(bind == elf.STB_GLOBAL || !courseWeak[name].equal(symbolContents(f, s))):
				seen[s.Name] = true
				shown := mangledShown(name)
				if seenShown[shown] { // a constructor's or destructor's variants (C1/C2, D1/D2)
					continue
				}
				seenShown[shown] = true
				vs = append(vs, Violation{Rule: ruleInterpose, Symbol: shown, Found: s.Name, File: at(lastComponent(shown)),
					Why: "the driver or the harness has its own inline definition of that name, and yours (" + map[bool]string{true: "a strong one", false: "a different one, linked first"}[bind == elf.STB_GLOBAL] + ") would be the one their code runs; give your function or type another name"})
			case !defined && sideRoutes[name] != "":
				seen[s.Name] = true
				vs = append(vs, Violation{Rule: ruleSide, Symbol: name, Found: s.Name, File: at(name),
					Why: sideWhy(name)})
			case fileStream(s.Name) != "":
				seen[s.Name] = true
				if seenShown["file stream"] {
					continue
				}
				seenShown["file stream"] = true
				shown := fileStream(s.Name)
				vs = append(vs, Violation{Rule: ruleSide, Symbol: shown, Found: s.Name, File: at(strings.TrimPrefix(shown, "std::basic_")),
					Why: "opens files through the C++ library's file streams: ranks communicate only through the library the exercise teaches, and the harness does the run's own input and output"})
			case !defined && strings.HasPrefix(name, "PMPI_"):
				seen[s.Name] = true
				vs = append(vs, Violation{Rule: ruleSide, Symbol: name, Found: s.Name, File: at(name),
					Why: "MPI's profiling names (PMPI_*) skip the driver's watch of your MPI calls; call the MPI_* function"})
			case !defined && strings.HasPrefix(s.Name, "mgpu_") && !learnerHarnessCalls[s.Name]:
				seen[s.Name] = true
				vs = append(vs, Violation{Rule: ruleHarness, Symbol: s.Name, Found: s.Name, File: at(s.Name),
					Why: "the harness's recording, data and timing functions are the driver's: results count only when the driver computes and records them"})
			case !defined && courseOwn[name] != elf.STT_NOTYPE && !isAPI(name, api) &&
				!strings.HasPrefix(name, "mgpu_") && !strings.HasPrefix(name, "__") &&
				!(courseOwn[name] == elf.STT_FUNC && libraryName(name)):
				// The driver's own functions and data (its expected values, its tallies, the
				// reference computation it checks against) are not the learner's to use: only
				// what the exercise's headers declare is.
				seen[s.Name] = true
				what := "function"
				if courseOwn[name] == elf.STT_OBJECT || courseOwn[name] == elf.STT_TLS {
					what = "data"
				}
				shown := demangledName(s.Name)
				vs = append(vs, Violation{Rule: ruleDriver, Symbol: shown, Found: s.Name, File: at(lastComponent(mangledShown(name))),
					Why: "that is the course driver's own " + what + ", not part of the exercise's interface (its headers): the driver's expected values, tallies and reference code are not yours to use"})
			case defined && typ == elf.STT_GNU_IFUNC:
				seen[s.Name] = true
				vs = append(vs, Violation{Rule: ruleStartup, Symbol: s.Name, Found: s.Name, File: at(s.Name),
					Why: "an indirect function's resolver runs while the program is loaded, before the harness starts"})
			case defined && courseUndef[name] && !isAPI(name, api) &&
				(bind == elf.STB_GLOBAL || bind == elf.STB_WEAK && !strings.HasPrefix(s.Name, "_Z")):
				seen[s.Name] = true
				shown := demangledName(s.Name)
				vs = append(vs, Violation{Rule: ruleInterpose, Symbol: shown, Found: s.Name, File: at(shown),
					Why: "the driver or the harness calls a function of that name, and your definition would replace the library's for them; give your function another name"})
			}
		}
		f.Close()
	}
	return vs, checked, nil
}

// pythonPolicy runs mgpu_policy.py over the learner's Python files.
func (k *check) pythonPolicy(ctx context.Context, prog *program) ([]Violation, int, error) {
	var files []string
	show := map[string]string{}
	for _, lf := range prog.learner {
		if strings.HasSuffix(lf.Name, ".py") {
			files = append(files, lf.Path)
			show[lf.Path] = lf.Show
		}
	}
	if len(files) == 0 {
		return nil, 0, nil
	}
	script := filepath.Join(prog.srcDir, "mgpu_policy.py")
	cmd := exec.CommandContext(ctx, k.c.Env.Python(), append([]string{"-I", script}, files...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var vs []Violation
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var f struct {
			File, What, Why string
			Line            int
		}
		if jerr := json.Unmarshal(sc.Bytes(), &f); jerr != nil {
			return nil, 0, fmt.Errorf("mgpu_policy.py printed %q: %v", sc.Text(), jerr)
		}
		if f.What == "unreadable" {
			return nil, 0, fmt.Errorf("mgpu_policy.py could not read %s: %s", f.File, f.Why)
		}
		file := show[f.File]
		if file == "" {
			file = path.Base(filepath.ToSlash(f.File))
		}
		if f.Line > 0 {
			file = fmt.Sprintf("%s:%d", file, f.Line)
		}
		vs = append(vs, Violation{Rule: rulePython, Symbol: f.What, Found: f.What, File: file, Why: f.Why})
	}
	if err != nil && len(vs) == 0 {
		return nil, 0, fmt.Errorf("mgpu_policy.py: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return vs, len(files), nil
}

// integrityMessage is the report's explanation of integrity violations.
func integrityMessage(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		switch v.Rule {
		case ruleHarness:
			fmt.Fprintf(&b, "Your code calls the harness's %s (in %s): %s.\n", v.Symbol, v.File, v.Why)
		case ruleDriver:
			fmt.Fprintf(&b, "Your code uses %s (in %s): %s.\n", v.Symbol, v.File, v.Why)
		case ruleStartup:
			fmt.Fprintf(&b, "Your code has start-up code %s (in %s): %s.\n", v.Symbol, v.File, v.Why)
		case ruleInterpose:
			fmt.Fprintf(&b, "Your code defines %s (in %s): %s.\n", v.Symbol, v.File, v.Why)
		case ruleSource:
			fmt.Fprintf(&b, "Your code has %s (in %s): %s.\n", v.Found, v.File, v.Why)
		case rulePython:
			fmt.Fprintf(&b, "Your code uses %s (in %s), which %s.\n", v.Symbol, v.File, v.Why)
		case ruleSide:
			fmt.Fprintf(&b, "Your code calls %s (in %s), which %s.\n", v.Symbol, v.File, v.Why)
		}
	}
	b.WriteString("The check trusts only what the course's driver computes and records; write the functions the task asks for and nothing that reaches past them.")
	return b.String()
}

// libraryName says whether a function name belongs to a library the exercises use: a driver
// that defines one wraps the library's function to watch the learner's calls (module2's
// drivers define MPI_Allreduce and call PMPI_Allreduce), and the learner calls it as usual.
func libraryName(name string) bool {
	for _, p := range []string{"MPI_", "PMPI_", "nccl", "pnccl", "cuda", "cu", "nvshmem", "shmem_", "pthread_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// unversioned is a symbol's name without its version ("send@@GLIBC_2.2.5" -> "send").
func unversioned(name string) string {
	if i := strings.IndexByte(name, '@'); i > 0 {
		return name[:i]
	}
	return name
}

// reservedName says whether a definition takes a name that C and C++ reserve for the
// implementation (a leading underscore at file scope), which the C library and the C run-time
// objects call by that name: crti's _init calls __gmon_start__ before every constructor, crt1's
// _start calls __libc_start_main. C++ mangled names (_Z...) and nvcc's fat binary wrappers are
// the compiler's own.
func reservedName(name string) bool {
	return strings.HasPrefix(name, "_") && !strings.HasPrefix(name, "_Z") &&
		!strings.HasPrefix(name, "__fatbinwrap_")
}

// toolchainShared are weak definitions the compiler emits alike in every object: the
// personality routine's reference and nvcc's tables of host references (relocatable device
// code), whose contents differ from object to object by design.
func toolchainShared(name string) bool {
	return strings.HasPrefix(name, "DW.ref.") || strings.HasPrefix(name, "hostRef")
}

// weakDef is what a defined symbol of an object holds: its bytes (nil for an uninitialized
// one) and the relocations that fill them in, by offset from the symbol's start.
type weakDef struct {
	size   uint64
	bytes  []byte
	relocs []string
}

// equal says whether two definitions are the same code or data: a weak (COMDAT) copy that
// an inline function or template of a shared header left in both objects.
func (w *weakDef) equal(o *weakDef) bool {
	return w != nil && o != nil && w.size == o.size && bytes.Equal(w.bytes, o.bytes) &&
		slices.Equal(w.relocs, o.relocs)
}

// symbolContents reads a defined symbol of a relocatable object: its bytes and relocations
// (x86-64 and AArch64 keep addends in the relocations, so the bytes of two copies of the same
// code are equal wherever a relocation will write). A relocation against a section symbol is
// named by the section, without its addend: string pools and local functions lie at different
// offsets in different objects.
func symbolContents(f *elf.File, s elf.Symbol) *weakDef {
	w := &weakDef{size: s.Size}
	idx := int(s.Section)
	if idx <= 0 || idx >= len(f.Sections) {
		return w
	}
	sec := f.Sections[idx]
	if sec.Type != elf.SHT_NOBITS {
		data, err := sec.Data()
		if err == nil && s.Value <= uint64(len(data)) && s.Value+s.Size <= uint64(len(data)) {
			w.bytes = data[s.Value : s.Value+s.Size]
		}
	}
	syms, _ := f.Symbols() // index i of this slice is symbol table index i+1
	for _, rs := range f.Sections {
		if rs.Type != elf.SHT_RELA || int(rs.Info) != idx || f.Class != elf.ELFCLASS64 {
			continue
		}
		data, err := rs.Data()
		if err != nil {
			continue
		}
		for i := 0; i+24 <= len(data); i += 24 {
			off := f.ByteOrder.Uint64(data[i:])
			info := f.ByteOrder.Uint64(data[i+8:])
			addend := int64(f.ByteOrder.Uint64(data[i+16:]))
			if off < s.Value || off >= s.Value+s.Size {
				continue
			}
			target := "?"
			if si := int(info >> 32); si > 0 && si <= len(syms) {
				t := syms[si-1]
				switch {
				case elf.ST_TYPE(t.Info) == elf.STT_SECTION && int(t.Section) < len(f.Sections):
					target = "section " + f.Sections[t.Section].Name
				default:
					target = fmt.Sprintf("%s%+d", t.Name, addend)
				}
			}
			w.relocs = append(w.relocs, fmt.Sprintf("%d %d %s", off-s.Value, uint32(info), target))
		}
	}
	slices.Sort(w.relocs)
	return w
}

// mangledShown is a C++ symbol's qualified name as far as it reads simply ("_ZN9dev_scopeD1Ev"
// -> "dev_scope::~dev_scope"), or the symbol itself.
func mangledShown(sym string) string {
	rest, ok := strings.CutPrefix(sym, "_Z")
	if !ok {
		return sym
	}
	rest = strings.TrimPrefix(rest, "N")
	var parts []string
	for len(rest) > 0 && isIdentDigit(rest[0]) {
		i := 0
		for i < len(rest) && isIdentDigit(rest[i]) {
			i++
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n <= 0 || i+n > len(rest) {
			break
		}
		parts = append(parts, rest[i:i+n])
		rest = rest[i+n:]
	}
	if len(parts) == 0 {
		return sym
	}
	if len(rest) > 1 && (rest[0] == 'C' || rest[0] == 'D') && isIdentDigit(rest[1]) {
		last := parts[len(parts)-1]
		if rest[0] == 'D' {
			last = "~" + last
		}
		parts = append(parts, last)
	}
	return strings.Join(parts, "::")
}

// lastComponent is the unqualified name of a qualified one, without a destructor's tilde.
func lastComponent(name string) string {
	if i := strings.LastIndex(name, "::"); i >= 0 {
		name = name[i+2:]
	}
	return strings.TrimPrefix(name, "~")
}
