package binpaging_test

import (
	"os"
	"slices"
	"testing"

	"github.com/podkit/podkit/examples/kube/internal/binpaging"
)

// Random marks the binary's read-only mappings random-read (VmFlags rr in
// /proc/self/smaps) and leaves its writable ones alone; the package's init
// has done so already, unless PODKIT_BINARY_PAGING said readahead.
func TestRandomAdvisesTheBinarysReadOnlyMappings(t *testing.T) {
	if n, err := binpaging.Applied(); err != nil || (n == 0 && os.Getenv(binpaging.EnvVar) != "readahead") {
		t.Errorf("Applied() = %d, %v; want bytes advised at init", n, err)
	}
	n, err := binpaging.Random()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("Random advised no mapping")
	}
	maps, err := binpaging.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	var readOnly int
	for _, m := range maps {
		random := slices.Contains(m.VmFlags, "rr")
		switch {
		case m.Writable() && random:
			t.Errorf("the writable mapping (%s) of the binary was advised random", m.Perms)
		case !m.Writable():
			readOnly++
			if !random && m.KiB["Anonymous"] == 0 {
				t.Errorf("the read-only mapping (%s) of the binary is not random-read: %v", m.Perms, m.VmFlags)
			}
		}
	}
	if readOnly == 0 {
		t.Fatalf("found no read-only mapping of the binary in /proc/self/smaps")
	}
}

// Release drops the resident pages of the binary's read-only mappings:
// fewer are resident right after it than before, and the program goes on
// running (its code faults back in).
func TestReleaseDropsTheBinarysResidentPages(t *testing.T) {
	before := residentReadOnly(t)
	if before == 0 {
		t.Fatal("no resident page of the binary's read-only mappings before Release")
	}
	n, err := binpaging.Release()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("Release released no mapping")
	}
	if after := residentReadOnly(t); after >= before {
		t.Errorf("resident KiB of the binary's read-only mappings: %d before Release, %d after; want fewer", before, after)
	}
}

// residentReadOnly returns the resident KiB of the running binary's
// read-only mappings, from /proc/self/smaps.
func residentReadOnly(t *testing.T) int {
	t.Helper()
	maps, err := binpaging.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	kib := 0
	for _, m := range maps {
		if !m.Writable() {
			kib += m.KiB["Rss"]
		}
	}
	return kib
}
