package kube_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildKwokFailsClearly checks that buildKwok, the kwok side of
// BenchmarkDensity, says kwok cannot be built, and why, when it cannot:
// then the benchmark skips with that message instead of failing later.
func TestBuildKwokFailsClearly(t *testing.T) {
	ctx := context.Background()
	t.Run("not a version", func(t *testing.T) {
		for _, v := range []string{"", "0.8.0", "v0.8.0@x", "latest", "v0.8.0 -x"} {
			_, err := buildKwok(ctx, "go", v, t.TempDir())
			if !errors.Is(err, errKwokBuild) || !strings.Contains(err.Error(), "not a module version") {
				t.Errorf("version %q: got %v, want errKwokBuild saying it is not a module version", v, err)
			}
		}
	})
	t.Run("no go command", func(t *testing.T) {
		goCmd := filepath.Join(t.TempDir(), "no-go")
		_, err := buildKwok(ctx, goCmd, "v0.8.0", t.TempDir())
		if !errors.Is(err, errKwokBuild) || !strings.Contains(err.Error(), goCmd) {
			t.Errorf("got %v, want errKwokBuild naming %s", err, goCmd)
		}
	})
	t.Run("module not found", func(t *testing.T) {
		// No proxy, and a version the module cache does not hold: the go
		// command fails at once, as it does offline.
		t.Setenv("GOPROXY", "off")
		_, err := buildKwok(ctx, "go", "v0.0.1", t.TempDir())
		if !errors.Is(err, errKwokBuild) || !strings.Contains(err.Error(), kwokPackage+"@v0.0.1") || !strings.Contains(err.Error(), "GOPROXY=off") {
			t.Errorf("got %v, want errKwokBuild naming %s@v0.0.1 and the go command's reason", err, kwokPackage)
		}
	})
}
