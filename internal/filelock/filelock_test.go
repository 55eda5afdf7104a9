package filelock

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// A held lock refuses a second taker (one try, then a short wait), which gets it once released;
// a missing folder is created.
func TestLock(t *testing.T) {
	name := filepath.Join(t.TempDir(), "sub", "x.lock")
	ctx := context.Background()
	unlock, ok, err := Lock(ctx, name, 0)
	if err != nil || !ok {
		t.Fatalf("first Lock: ok %v err %v", ok, err)
	}
	for _, wait := range []time.Duration{0, 30 * time.Millisecond} {
		if u, ok, err := Lock(ctx, name, wait); err != nil || ok {
			if u != nil {
				u()
			}
			t.Fatalf("Lock (wait %s) while held: ok %v err %v", wait, ok, err)
		}
	}
	unlock()
	u, ok, err := Lock(ctx, name, 0)
	if err != nil || !ok {
		t.Fatalf("Lock after release: ok %v err %v", ok, err)
	}
	u()
}
