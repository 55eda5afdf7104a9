package probe

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// TestLive probes the real machine and prints the facts; it runs only with MGPU_PROBE_LIVE=1
// (used on the GPU machines to check the parsers against real tools).
func TestLive(t *testing.T) {
	if os.Getenv("MGPU_PROBE_LIVE") == "" {
		t.Skip("set MGPU_PROBE_LIVE=1 to probe this machine")
	}
	start := time.Now()
	f, err := Discover(context.Background(), Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	t.Logf("probed in %s\n%s", time.Since(start), b)
	b, _ = json.MarshalIndent(f.Toolchain(false), "", "  ")
	t.Logf("toolchain (arch %s)\n%s", f.Arch(), b)
}
