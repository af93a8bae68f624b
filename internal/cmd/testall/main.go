// Command testall runs the tests of every Go module in this repository: the
// root module and each nested module under examples/. It is the one test
// command of the README and of CI.
//
// It uses the race detector when cgo can build it (a C compiler is present),
// and says so when it cannot. Extra arguments are passed to every go test,
// for example: go run ./internal/cmd/testall -run TestFoo -count=1
package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	root, err := os.Getwd()
	if err != nil {
		fail("testall: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		fail("testall: run me from the repository root (no go.mod in %s)", root)
	}
	modules, err := findModules(root)
	if err != nil {
		fail("testall: finding modules: %v", err)
	}
	// -count=1: every run really runs the tests (no cached results);
	// -timeout 45m: examples/kube's one test binary runs a whole cluster's
	// scenarios, 10 to 11 minutes on a 2-core machine beside two CPU hogs
	// and past 30 at a load average of 30, past go test's default of 10
	// (a hang still ends, with every goroutine's stack). Flags given on the command line come later and win.
	args := []string{"test", "-count=1", "-timeout", "45m"}
	if raceAvailable() {
		args = append(args, "-race")
	} else {
		fmt.Println("testall: no C compiler found: running without -race")
	}
	args = append(args, os.Args[1:]...)
	args = append(args, "./...")

	var failed []string
	for _, m := range modules {
		rel, _ := filepath.Rel(root, m)
		start := time.Now()
		fmt.Printf("=== module %s: go %s\n", rel, strings.Join(args, " "))
		cmd := exec.Command("go", args...)
		cmd.Dir = m
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			failed = append(failed, rel)
		}
		fmt.Printf("=== module %s: done in %s\n", rel, time.Since(start).Round(time.Second))
	}
	if len(failed) > 0 {
		fail("testall: tests failed in: %s", strings.Join(failed, ", "))
	}
	fmt.Printf("testall: every test of %d modules passed\n", len(modules))
}

// findModules returns the directories holding a go.mod, the root first.
func findModules(root string) ([]string, error) {
	var mods []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			mods = append(mods, filepath.Dir(path))
		}
		return nil
	})
	sort.Slice(mods, func(i, j int) bool {
		if mods[i] == root || mods[j] == root {
			return mods[i] == root
		}
		return mods[i] < mods[j]
	})
	return mods, err
}

func raceAvailable() bool {
	out, err := exec.Command("go", "env", "CGO_ENABLED", "CC").Output()
	if err != nil {
		return false
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 || fields[0] != "1" {
		return false
	}
	_, err = exec.LookPath(fields[1])
	return err == nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
