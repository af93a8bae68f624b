// Package binpaging keeps a program's own binary from staying resident
// beyond the pages it runs.
//
// A Go program of client-go's size has tens of MiB of code and read-only
// data, of which it runs a small part, scattered. Yet most of it ends up
// resident (RssFile): protobuf's internal/detrand init reads eight samples
// spread over the binary, and each read brings the kernel's read-ahead
// window along (read_ahead_kb: 128 KiB on many disks, 8 MiB on some virtual
// ones), so that much of the binary sits in the page cache, in large folios
// that later page faults map whole or by fault-around. Release, once the
// program is set up, drops the resident pages of the binary's read-only
// mappings and its cached pages; from then on, with the MADV_RANDOM advice
// the package's init gives (Random), a fault reads and maps the page it
// needs rather than a read-ahead window.
//
// A program that imports the package advises at its init, before the
// packages that import it run, unless EnvVar says readahead; Applied says
// what it did. The program's runs of itself (the process runtime's log
// shims and sandbox stages, started with an environment of their own) are
// advised too. Random alone does not shrink the RSS: detrand's reads come
// before it.
package binpaging

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// EnvVar is the environment variable that chooses the paging at init:
// "readahead" keeps the kernel's default; anything else, or unset, is
// random.
const EnvVar = "PODKIT_BINARY_PAGING"

var (
	advised    int
	advisedErr error
)

func init() {
	if os.Getenv(EnvVar) == "readahead" {
		return
	}
	advised, advisedErr = Random()
}

// Applied returns what the package's init advised: the bytes of the
// binary's mappings made random (0 with EnvVar=readahead) and Random's
// error. Safe to call from any goroutine.
func Applied() (int, error) { return advised, advisedErr }

// Random advises the kernel (madvise MADV_RANDOM) that the running
// program's read-only mappings of its own binary, its code and read-only
// data, are read at random: a page fault then reads the page it needs, not
// the read-ahead window around it. It returns how many bytes it advised;
// the error is for /proc/self/smaps that cannot be read or parsed, or a
// madvise the kernel refused. The pages already resident stay.
//
// The package's init calls it. It is safe to call from any goroutine, and
// more than once.
func Random() (int, error) { return adviseBinary(syscall.MADV_RANDOM) }

// Release drops the running program's resident pages of its own binary's
// read-only mappings (madvise MADV_DONTNEED: they are never written, so a
// later access reads them again from the file), and asks the kernel to
// drop the binary's pages it caches and no process maps (fadvise
// POSIX_FADV_DONTNEED). Call it once the program has started (its inits,
// its set-up), so that what stays resident is what it runs from then on.
// It returns how many bytes of mappings it released; the error is as
// Random's, or for a binary that cannot be opened.
//
// Safe to call from any goroutine, at any time: the code running then
// faults its pages back in.
func Release() (int, error) {
	n, err := adviseBinary(syscall.MADV_DONTNEED)
	if err != nil {
		return n, err
	}
	exe, err := os.Executable()
	if err != nil {
		return n, fmt.Errorf("binpaging: %w", err)
	}
	f, err := os.Open(exe)
	if err != nil {
		return n, fmt.Errorf("binpaging: %w", err)
	}
	defer f.Close()
	if err := dropCached(f); err != nil {
		return n, fmt.Errorf("binpaging: fadvise %s: %w", exe, err)
	}
	return n, nil
}

// adviseBinary applies madvise advice to each read-only mapping of the
// running program's binary that holds only the file's own pages, and
// returns the bytes advised. Never the writable ones, nor a read-only one
// with pages of its own (Anonymous in /proc/self/smaps: a RELRO segment
// the dynamic loader relocated before making it read-only, in a PIE or
// externally linked build): MADV_DONTNEED would drop their data.
func adviseBinary(advice int) (int, error) {
	maps, err := Mappings()
	if err != nil {
		return 0, err
	}
	advised := 0
	for _, m := range maps {
		if m.Writable() || m.KiB["Anonymous"] > 0 {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.Start, m.End-m.Start, uintptr(advice)); errno != 0 {
			return advised, fmt.Errorf("binpaging: madvise %x-%x: %w", m.Start, m.End, errno)
		}
		advised += int(m.End - m.Start)
	}
	return advised, nil
}

// Mapping is one mapping of the running program's binary, as
// /proc/self/smaps describes it.
type Mapping struct {
	// Start and End are its addresses, End excluded.
	Start, End uintptr
	// Perms is its permissions, such as "r-xp".
	Perms string
	// KiB holds its "Key: N kB" lines (Rss, Anonymous, ...) by key.
	KiB map[string]int
	// VmFlags is its VmFlags line's flags, such as "rd", "ex", "rr".
	VmFlags []string
}

// Writable reports whether the mapping may be written.
func (m Mapping) Writable() bool { return strings.Contains(m.Perms, "w") }

// Mappings returns the running program's mappings of its own binary, in
// the order of /proc/self/smaps. The error is for a /proc/self/smaps that
// cannot be read or parsed. Safe to call from any goroutine.
func Mappings() ([]Mapping, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("binpaging: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("binpaging: %w", err)
	}
	defer f.Close()
	var maps []Mapping
	var cur *Mapping // the binary's mapping being read, if any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-01fbf000 r-xp 00000000 fd:00 1234   /path/to/binary
		// followed by "Key:   N kB" lines and "VmFlags: rd ex ...".
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if key, ok := strings.CutSuffix(fields[0], ":"); ok {
			switch {
			case cur == nil:
			case key == "VmFlags":
				cur.VmFlags = fields[1:]
			case len(fields) == 3 && fields[2] == "kB":
				n, err := strconv.Atoi(fields[1])
				if err != nil {
					return nil, fmt.Errorf("binpaging: /proc/self/smaps: %q: %w", sc.Text(), err)
				}
				cur.KiB[key] = n
			}
			continue
		}
		cur = nil
		if len(fields) < 6 || strings.Join(fields[5:], " ") != exe {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("binpaging: /proc/self/smaps: bad range %q", fields[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("binpaging: /proc/self/smaps: bad range %q", fields[0])
		}
		maps = append(maps, Mapping{Start: uintptr(start), End: uintptr(end), Perms: fields[1], KiB: map[string]int{}})
		cur = &maps[len(maps)-1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("binpaging: /proc/self/smaps: %w", err)
	}
	return maps, nil
}
