package checker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// testDriver is the driver integrityCheck compiles: it calls the learner's scale, a library
// function, the harness's recording, and an inline (weak) function of its own; it keeps its
// expected values and its reference computation in globals of its own.
const testDriver = `#include <string.h>
#include <stdio.h>
void scale(float *x, int n);
int mgpu_record_case(const char *c, const void *r, int f);
__attribute__((weak)) int course_helper(int x) { return x + 1; }
float expected[4];
void reference_scale(float *x, int n) { memcpy(x, expected, 4 * (size_t)n); }
int main(int argc, char **argv) { float x[4]; scale(x, course_helper(3)); fwrite(x, 4, 1, stdout); return mgpu_record_case(argv[argc-1], 0, 0); }
`

// integrityCheck compiles a driver and a learner file with cc and runs the object rules.
func integrityCheck(t *testing.T, learner string) []Violation {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no cc")
	}
	manifest := strings.Replace(baseManifest, "driver: driver.c\n", "driver: driver.c\nsupport: [api.h]\n", 1)
	fsys := fstest.MapFS{
		"lessons/course.yaml":                  {Data: []byte("title: t\nmodules: [module0-x]\n")},
		"lessons/module0-x/module.yaml":        {Data: []byte("id: module0\ntitle: x\nexercises: [ex]\n")},
		"exercises/module0-x/ex/exercise.yaml": {Data: []byte(manifest)},
		"exercises/module0-x/ex/task.md":       {Data: []byte("# task\n")},
		"exercises/module0-x/ex/api.h":         {Data: []byte("void scale(float *x, int n);\n")},
		"exercises/module0-x/ex/driver.c":      {Data: []byte("x")},
		"exercises/module0-x/ex/starter/a.c":   {Data: []byte("x")},
		"exercises/module0-x/ex/solution/a.c":  {Data: []byte("x")},
	}
	c, err := course.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	compile := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		obj := p + ".o"
		if out, err := exec.Command(cc, "-c", p, "-o", obj).CombinedOutput(); err != nil {
			t.Fatalf("cc %s: %v\n%s", name, err, out)
		}
		return obj
	}
	driver := compile("driver.c", testDriver)
	k := &check{e: c.Exercise("module0/ex")}
	prog := &program{courseObjects: []string{driver}, learner: []learnerFile{{Name: "a.c", Path: filepath.Join(dir, "a.c"), Show: "a.c", Object: compile("a.c", learner)}}}
	vs, n, err := k.objectIntegrity(prog)
	if err != nil || n != 1 {
		t.Fatalf("objectIntegrity: %v (%d objects)", err, n)
	}
	return vs
}

func TestIntegrityRules(t *testing.T) {
	for _, tc := range []struct {
		name, src, rule, symbol string
	}{
		{"honest", "#include <string.h>\nstatic void helper(float *x) { memset(x, 0, 4); }\nvoid scale(float *x, int n) { helper(x); (void)n; }\n", "", ""},
		{"plain constructor", "__attribute__((constructor)) static void early(void) {}\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", "", ""},
		{"records a case", "int mgpu_record_case(const char *c, const void *r, int f);\nvoid scale(float *x, int n) { (void)x; (void)n; mgpu_record_case(\"a\", 0, 0); }\n", ruleHarness, "mgpu_record_case"},
		{"error check is fine", "void mgpu_check_cuda(int e, const char *c, const char *f, int l);\nvoid scale(float *x, int n) { (void)x; mgpu_check_cuda(n, \"\", \"\", 0); }\n", "", ""},
		{"prioritized constructor", "__attribute__((constructor(101))) static void early(void) {}\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleStartup, ".init_array.00101"},
		{"preinit", "static void early(void) {}\n__attribute__((section(\".preinit_array\"), used)) static void (*p)(void) = early;\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleStartup, ".preinit_array"},
		{"ifunc", "static void real(float *x, int n) { (void)x; (void)n; }\nstatic void (*resolve(void))(float *, int) { return real; }\nvoid scale(float *x, int n) __attribute__((ifunc(\"resolve\")));\n", ruleStartup, "scale"},
		{"init_array under another name", "static void early(void) {}\n__asm__(\".section .myinit,\\\"aw\\\",@init_array\\n.p2align 3\\n.quad early\\n.previous\");\n__attribute__((used)) static void (*keep)(void) = early;\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleStartup, ".myinit"},
		{"preinit_array under another name", "static void early(void) {}\n__asm__(\".section .pre,\\\"aw\\\",@preinit_array\\n.p2align 3\\n.quad early\\n.previous\");\n__attribute__((used)) static void (*keep)(void) = early;\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleStartup, ".pre"},
		{"defines __gmon_start__", "void __gmon_start__(void) {}\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleInterpose, "__gmon_start__"},
		{"defines __libc_start_main", "int __libc_start_main(void) { return 0; }\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleInterpose, "__libc_start_main"},
		{"reserved name, static", "static int _helper(int x) { return x; }\nvoid scale(float *x, int n) { x[0] = (float)_helper(n); }\n", "", ""},
		{"versioned definition", "#include <stddef.h>\nsize_t my_send(int fd, const void *b, size_t n, int fl) { (void)fd; (void)b; (void)fl; return n; }\n__asm__(\".symver my_send, send@@GLIBC_2.2.5\");\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleInterpose, "send@@GLIBC_2.2.5"},
		{"strong over the driver's weak", "int course_helper(int x) { (void)x; return 0; }\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleInterpose, "course_helper"},
		{"different weak over the driver's weak", "__attribute__((weak)) int course_helper(int x) { return x - 1; }\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleInterpose, "course_helper"},
		{"same weak as the driver's", "__attribute__((weak)) int course_helper(int x) { return x + 1; }\nvoid scale(float *x, int n) { x[0] = (float)course_helper(n); }\n", "", ""},
		{"copies the driver's expected values", "#include <string.h>\nextern float expected[4];\nvoid scale(float *x, int n) { memcpy(x, expected, 4 * (size_t)n); }\n", ruleDriver, "expected"},
		{"calls the driver's reference", "void reference_scale(float *x, int n);\nvoid scale(float *x, int n) { reference_scale(x, n); }\n", ruleDriver, "reference_scale"},
		// Side routes between processes: inputs or results shared behind the exercise's library.
		{"shared memory", "#include <sys/mman.h>\n#include <fcntl.h>\nvoid scale(float *x, int n) { int fd = shm_open(\"/x\", O_RDWR, 0600); x[0] = (float)(fd + n); }\n", ruleSide, "shm_open"},
		{"socket", "#include <sys/socket.h>\nvoid scale(float *x, int n) { x[0] = (float)(socket(AF_UNIX, SOCK_STREAM, 0) + n); }\n", ruleSide, "socket"},
		{"fopen", "#include <stdio.h>\nvoid scale(float *x, int n) { FILE *f = fopen(\"/tmp/x\", \"r\"); x[0] = (float)n; if (f) fclose(f); }\n", ruleSide, "fopen"},
		{"changes the environment", "#include <stdlib.h>\nvoid scale(float *x, int n) { setenv(\"NCCL_MAX_NCHANNELS\", \"1\", 1); x[0] = (float)n; }\n", ruleSide, "setenv"},
		{"writes environ", "extern char **environ;\nvoid scale(float *x, int n) { environ = 0; x[0] = (float)n; }\n", ruleSide, "environ"},
		{"raw system call", "#include <unistd.h>\n#include <sys/syscall.h>\nvoid scale(float *x, int n) { x[0] = (float)(syscall(SYS_getpid) + n); }\n", ruleSide, "syscall"},
		{"address of mmap taken", "#include <sys/mman.h>\nvoid *(*volatile m)(void *, unsigned long, int, int, int, long) = mmap;\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleSide, "mmap"},
		{"looks open up by name", "#define _GNU_SOURCE\n#include <dlfcn.h>\nvoid scale(float *x, int n) { int (*o)(const char *, int) = (int (*)(const char *, int))dlsym(RTLD_DEFAULT, \"open\"); x[0] = (float)(o != 0) + (float)n; }\n", ruleSide, "dlsym"},
		{"open under glibc's other name", "int __open(const char *p, int fl, ...);\nvoid scale(float *x, int n) { x[0] = (float)(__open(\"/tmp/x\", 0) + n); }\n", ruleSide, "__open"},
		{"walks the loaded libraries", "#define _GNU_SOURCE\n#include <link.h>\nstatic int visit(struct dl_phdr_info *i, size_t s, void *a) { (void)i; (void)s; (void)a; return 1; }\nvoid scale(float *x, int n) { x[0] = (float)(dl_iterate_phdr(visit, 0) + n); }\n", ruleSide, "dl_iterate_phdr"},
		{"MPI's profiling name", "int PMPI_Barrier(int comm);\nvoid scale(float *x, int n) { x[0] = (float)PMPI_Barrier(n); }\n", ruleSide, "PMPI_Barrier"},
		{"variables named like the routes", "void scale(float *x, int n) { int open = n, pipe = 1, connect = 2; x[0] = (float)(open + pipe + connect); }\n", "", ""},
		{"interposes fwrite", "#include <stdio.h>\nsize_t fwrite(const void *p, size_t s, size_t n, FILE *f) { (void)p; (void)s; (void)f; return n; }\nvoid scale(float *x, int n) { (void)x; (void)n; }\n", ruleInterpose, "fwrite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := integrityCheck(t, tc.src)
			if tc.rule == "" {
				if len(vs) != 0 {
					t.Fatalf("honest code refused: %+v", vs)
				}
				return
			}
			for _, v := range vs {
				if v.Rule == tc.rule && v.Symbol == tc.symbol {
					if !strings.HasPrefix(v.File, "a.c") {
						t.Errorf("file %q", v.File)
					}
					return
				}
			}
			t.Fatalf("want a %s violation for %s, got %+v", tc.rule, tc.symbol, vs)
		})
	}
}

func TestMangledShown(t *testing.T) {
	for sym, want := range map[string]string{
		"_ZN9dev_scopeD1Ev":                "dev_scope::~dev_scope",
		"_ZN2ns6helperC2Ei":                "ns::helper::helper",
		"_Z10cudaMallocIfE9cudaErrorPPT_m": "cudaMalloc",
		"_ZNSt6vectorIfSaIfEED2Ev":         "_ZNSt6vectorIfSaIfEED2Ev",
		"course_helper":                    "course_helper",
	} {
		if got := mangledShown(sym); got != want {
			t.Errorf("mangledShown(%s) = %q, want %q", sym, got, want)
		}
	}
}

func TestIsAPI(t *testing.T) {
	api := map[string]bool{"ring_allreduce": true}
	for sym, want := range map[string]bool{
		"ring_allreduce": true,
		"_Z14ring_allreduceP8ncclCommiiPKfPfmS3_P11CUstream_st": true,
		"_Z6memcmpPKvS0_m": false,
		"memcmp":           false,
	} {
		if isAPI(sym, api) != want {
			t.Errorf("isAPI(%s) = %v", sym, !want)
		}
	}
}
