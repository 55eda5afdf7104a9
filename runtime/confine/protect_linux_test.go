package confine

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ProtectMemory makes the process undumpable: its memory is closed to the user's other
// processes without CAP_SYS_PTRACE.
func TestProtectMemory(t *testing.T) {
	if os.Getenv("MGPU_CONFINE_PROTECT_CHILD") == "1" {
		before, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
		if err := ProtectMemory(); err != nil {
			fmt.Println("error:", err)
			return
		}
		after, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
		fmt.Printf("before=%d after=%d\n", before, after)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProtectMemory$")
	cmd.Env = append(os.Environ(), "MGPU_CONFINE_PROTECT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "before=1 after=0") {
		t.Errorf("child said %q, want before=1 after=0", out)
	}
}
