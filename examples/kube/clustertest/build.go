package clustertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// modulePath is the module clustertest and podkit-controlplane are in.
const modulePath = "github.com/podkit/podkit/examples/kube"

// controlPlanePackage is the podkit-controlplane program, in modulePath.
const controlPlanePackage = "./cmd/podkit-controlplane"

// BuildControlPlane builds the podkit-controlplane program (the control
// plane Start runs as a child process) from the source of this module and
// returns the path of the binary. log receives the go command's output
// (nil: discarded).
//
// It runs go build in this module's directory, with the module's own
// go.mod (its replace directives are what k8s.io/kubernetes needs, and why
// a module importing clustertest needs none), into a directory of the
// user's cache (os.UserCacheDir()/podkit/control-plane/...): the first
// build compiles Kubernetes (minutes; about 200 MB of binary), later
// ones find the binary up to date in seconds. The binary is built with the
// race detector when the calling program is, so that the packages its own
// build compiled are reused. Concurrent builds, from several test
// processes, take turns on a lock file.
//
// It needs the go command, found on PATH (go test puts its own there), and
// this module's source on disk: clustertest's own file path, as the
// compiler recorded it (so not with -trimpath), or else the directory
// "go list -m" gives from the working directory. Errors say which step
// failed, with the go command's output.
func BuildControlPlane(ctx context.Context, log io.Writer) (string, error) {
	return buildProgram(ctx, log, "control-plane", ".", controlPlanePackage, raceEnabled(), false)
}

// staticTags are the build tags that keep the standard library from
// linking the C library (its resolvers of names and users in Go).
const staticTags = "netgo,osusergo"

// stagesPackage is processruntime's podkit-stages program, in the podkit
// module this module requires.
const stagesPackage = "github.com/podkit/podkit/examples/nodeagent/processruntime/cmd/podkit-stages"

// BuildStages builds processruntime's cmd/podkit-stages, the small program
// an agent's pods' sandbox stages and log shims run
// (agent.Config.StageExecutable), as BuildControlPlane builds the control
// plane (with this module's go.mod, so from the same podkit source as the
// agents it builds with; with -race when the caller is), into
// os.UserCacheDir()/podkit/stages/..., and returns the binary's path.
// Without -race it is built static (the netgo and osusergo tags: it then
// links no C library), so that each stage's start skips the dynamic
// loader and the C library's set-up, about a millisecond of CPU each. It
// takes seconds, and less once built.
func BuildStages(ctx context.Context, log io.Writer) (string, error) {
	return buildProgram(ctx, log, "stages", ".", stagesPackage, raceEnabled(), true)
}

// metricsServerPackage is metrics-server's command, the tool of the
// module in metricsServerModule, whose go.mod pins it with the Kubernetes
// libraries it was released with (it does not run against this module's
// newer ones).
const (
	metricsServerPackage = "sigs.k8s.io/metrics-server/cmd/metrics-server"
	metricsServerModule  = "internal/metricsserver"
)

// BuildMetricsServer builds metrics-server (sigs.k8s.io/metrics-server, at
// the version internal/metricsserver/go.mod requires) as BuildControlPlane
// builds the control plane, without the race detector (it is not podkit's
// code), into os.UserCacheDir()/podkit/metrics-server/..., and returns the
// binary's path. The first build compiles its own Kubernetes libraries
// (minutes); later ones find it up to date in seconds.
func BuildMetricsServer(ctx context.Context, log io.Writer) (string, error) {
	return buildProgram(ctx, log, "metrics-server", metricsServerModule, metricsServerPackage, false, false)
}

// buildProgram builds pkg (with -race when race; static, with the netgo
// and osusergo tags, when static and not race) in the directory subdir of
// this module's (a module of its own, or "."), into the user's cache
// directory's podkit/<name>/<key>, under a lock, and returns the binary's
// path.
func buildProgram(ctx context.Context, log io.Writer, name, subdir, pkg string, race, static bool) (string, error) {
	if log == nil {
		log = io.Discard
	}
	moduleDir, err := moduleDir(ctx)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	key := sha256.Sum256([]byte(fmt.Sprintf("%s race=%v", moduleDir, race)))
	outDir := filepath.Join(cache, "podkit", name, hex.EncodeToString(key[:8]))
	if err := os.MkdirAll(outDir, privateDir); err != nil {
		return "", fmt.Errorf("clustertest: building %s: %w", name, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(outDir, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()

	out := filepath.Join(outDir, filepath.Base(pkg))
	args := []string{"build", "-buildvcs=false", "-o", out}
	if race {
		args = append(args, "-race")
	} else if static {
		args = append(args, "-tags", staticTags)
	}
	if _, err := goCommand(ctx, filepath.Join(moduleDir, subdir), log, append(args, pkg)...); err != nil {
		return "", err
	}
	return out, nil
}

// moduleDir returns the directory of modulePath's source: where the
// compiler found this file, or else what go list says from the working
// directory.
func moduleDir(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		dir := filepath.Dir(filepath.Dir(file))
		if isModuleDir(dir) {
			return dir, nil
		}
	}
	dir, err := goCommand(ctx, "", nil, "list", "-m", "-f", "{{.Dir}}", modulePath)
	if err != nil {
		return "", fmt.Errorf("clustertest: finding the source of %s (to build the control plane): %w", modulePath, err)
	}
	dir = strings.TrimSpace(dir)
	if !isModuleDir(dir) {
		return "", fmt.Errorf("clustertest: no source of %s in %q (to build the control plane)", modulePath, dir)
	}
	return dir, nil
}

// isModuleDir says whether dir holds modulePath's go.mod.
func isModuleDir(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(first) == "module "+modulePath
}

// raceEnabled says whether this program was built with the race detector.
func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// goCommand runs the go command with args in dir (empty: the working
// directory), outside any workspace and with -mod=readonly (a caller's
// -mod=mod must not rewrite this module's go.mod, nor -mod=vendor look for
// a vendor directory it has not), and returns its standard output; log,
// when set, also receives it and standard error as they come.
func goCommand(ctx context.Context, dir string, log io.Writer, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	flags := []string{"-mod=readonly"}
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if !strings.HasPrefix(strings.TrimLeft(f, "-"), "mod=") {
			flags = append(flags, f)
		}
	}
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.Join(flags, " "))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if log != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, log), io.MultiWriter(&stderr, log)
	}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("clustertest: go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// lockPollInterval is how often lockFile tries a lock another process
// holds.
const lockPollInterval = 100 * time.Millisecond

// lockFile takes an exclusive lock on the file at path (created if
// needed), waiting while another process holds it, and returns the
// function that releases it. The kernel releases it if this process dies.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, privateFile)
	if err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	ticker := time.NewTicker(lockPollInterval)
	defer ticker.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("clustertest: locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("clustertest: waiting for another build of the control plane: %w", ctx.Err())
		case <-ticker.C:
		}
	}
}
