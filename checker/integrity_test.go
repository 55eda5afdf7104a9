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
	driver := compile("driver.c", `#include <string.h>
#include <stdio.h>
void scale(float *x, int n);
int mgpu_record_case(const char *c, const void *r, int f);
int main(int argc, char **argv) { float x[4]; scale(x, 4); fwrite(x, 4, 1, stdout); return mgpu_record_case(argv[argc-1], 0, 0); }
`)
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
