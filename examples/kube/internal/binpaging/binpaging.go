// Package binpaging tells the kernel how a program reads its own binary:
// at random, so that a page fault maps the page it needs rather than the
// read-ahead window around it.
//
// A Go program of client-go's size has tens of MiB of code and read-only
// data, of which it runs a small part, scattered: each page fault on it
// reads ahead (128 KiB by default) and maps the neighbouring pages that
// came in with it (fault-around, 64 KiB). Most of those pages are never
// used, yet count in the program's resident memory (RssFile). With
// MADV_RANDOM on the binary's mappings the kernel reads and maps only the
// pages touched: a smaller RSS, for more (smaller) reads while the
// program first runs.
//
// A program that imports the package advises at its init, before the
// packages that import it (and the heavy inits of client-go's schemes)
// run, unless EnvVar says readahead; Applied says what it did. The
// program's runs of itself (the process runtime's log shims and sandbox
// stages, started with an environment of their own) are advised too.
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
// data, are read at random. It returns how many bytes it advised; the
// error is for /proc/self/maps that cannot be read or parsed, or a
// madvise the kernel refused. The pages already resident stay.
//
// The package's init calls it; call it again after mapping more of the
// binary. It is safe to call from any goroutine, and more than once.
func Random() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("binpaging: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("binpaging: %w", err)
	}
	defer f.Close()
	advised := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-01fbf000 r-xp 00000000 fd:00 1234   /path/to/binary
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || strings.Join(fields[5:], " ") != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return advised, fmt.Errorf("binpaging: /proc/self/maps: bad range %q", fields[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return advised, fmt.Errorf("binpaging: /proc/self/maps: bad range %q", fields[0])
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_RANDOM); errno != 0 {
			return advised, fmt.Errorf("binpaging: madvise %s: %w", fields[0], errno)
		}
		advised += int(end - start)
	}
	if err := sc.Err(); err != nil {
		return advised, fmt.Errorf("binpaging: /proc/self/maps: %w", err)
	}
	return advised, nil
}
