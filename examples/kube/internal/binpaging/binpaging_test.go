package binpaging_test

import (
	"os"
	"strconv"
	"strings"
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
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var readOnly, writable int
	var perms string
	for line := range strings.Lines(string(raw)) {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 6 && strings.Contains(fields[0], "-") && strings.Join(fields[5:], " ") == exe:
			perms = fields[1]
		case len(fields) >= 5 && strings.Contains(fields[0], "-"):
			perms = "" // another mapping
		case perms != "" && len(fields) > 0 && fields[0] == "VmFlags:":
			random := strings.Contains(line, " rr")
			if strings.Contains(perms, "w") {
				writable++
				if random {
					t.Errorf("the writable mapping (%s) of %s was advised random", perms, exe)
				}
			} else {
				readOnly++
				if !random {
					t.Errorf("the read-only mapping (%s) of %s is not random-read: %s", perms, exe, strings.TrimSpace(line))
				}
			}
		}
	}
	if readOnly == 0 {
		t.Fatalf("found no read-only mapping of %s in /proc/self/smaps", exe)
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
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	kib, mine := 0, false
	for line := range strings.Lines(string(raw)) {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-"):
			mine = len(fields) >= 6 && strings.Join(fields[5:], " ") == exe && !strings.Contains(fields[1], "w")
		case mine && len(fields) == 3 && fields[0] == "Rss:":
			n, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			kib += n
		}
	}
	return kib
}
