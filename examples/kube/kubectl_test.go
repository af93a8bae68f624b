package kube_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kubectl is the real kubectl (cmd/kubectl: k8s.io/kubernetes/cmd/kubectl's
// command reporting its release, the tool of this module), built once per
// test binary, run as its own process against a cluster.
type kubectl struct {
	bin, kubeconfig, home string
}

// binaries holds the commands the tests build, once per test binary; it
// is removed when the tests end (TestMain).
var binaries struct {
	once sync.Once
	dir  string
	err  error
	mu   sync.Mutex
	// built maps a package to its binary.
	built map[string]string
}

// buildOnce builds the command of package pkg (go build; with -race under
// -race, so it reuses the packages the test binary was built from, but
// kubectl: not podkit's code, its own races — drain's, in kubectl v0.37.2
// — are not this project's to fail on) once per test binary and returns
// its path.
func buildOnce(t testing.TB, pkg string) string {
	t.Helper()
	dir := binariesDir(t)
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if bin, ok := binaries.built[pkg]; ok {
		return bin
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if raceEnabled && pkg != kubectlPackage {
		args = append(args, "-race")
	}
	start := time.Now()
	out, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
	require.NoError(t, err, "building %s: %s", pkg, out)
	t.Logf("%s built in %v", pkg, time.Since(start).Round(time.Millisecond))
	binaries.built[pkg] = bin
	return bin
}

// buildAgentInstall builds cmd/podkit-agent with cmd/podkit-stages beside
// it, in a directory of their own that others may enter but not write, as
// the agent's doc installs them (so its --stage-executable auto finds the
// stages program), once per test binary, and returns the agent's path.
// With -race as buildOnce; else static, as the doc builds them.
func buildAgentInstall(t testing.TB) string {
	t.Helper()
	const key = "install:podkit-agent"
	parent := binariesDir(t)
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if bin, ok := binaries.built[key]; ok {
		return bin
	}
	dir := filepath.Join(parent, "install")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.Chmod(parent, 0o755))
	args := []string{"build", "-buildvcs=false", "-o", dir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	} else {
		args = append(args, "-tags", "netgo,osusergo") // as the doc's install
	}
	out, err := exec.Command("go", append(args, agentPackage, stagesPackage)...).CombinedOutput()
	require.NoError(t, err, "building %s and %s: %s", agentPackage, stagesPackage, out)
	bin := filepath.Join(dir, "podkit-agent")
	binaries.built[key] = bin
	return bin
}

// binariesDir returns the directory of the binaries the tests build,
// made at the first call.
func binariesDir(t testing.TB) string {
	t.Helper()
	binaries.once.Do(func() {
		binaries.dir, binaries.err = os.MkdirTemp("", "podkit-kube-test-bin-")
		binaries.built = map[string]string{}
	})
	require.NoError(t, binaries.err)
	return binaries.dir
}

// removeBinaries removes what buildOnce built.
func removeBinaries() {
	if binaries.dir != "" {
		os.RemoveAll(binaries.dir)
	}
}

// kubectlPackage is this module's kubectl (go tool kubectl).
const kubectlPackage = "github.com/podkit/podkit/examples/kube/cmd/kubectl"

// buildKubectl returns kubectl (built once per test binary) for the
// cluster of kubeconfig, with a home directory of its own (for its
// discovery cache) that lasts as long as t.
func buildKubectl(t *testing.T, kubeconfig string) *kubectl {
	t.Helper()
	bin := buildOnce(t, kubectlPackage)
	return &kubectl{bin: bin, kubeconfig: kubeconfig, home: t.TempDir()}
}

func (k *kubectl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig, "HOME="+k.home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// run runs kubectl with args and returns its stdout; a failure (non-zero
// exit) fails t with stderr.
func (k *kubectl) run(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := k.try(t, args...)
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), errOut)
	return out
}

// try runs kubectl with args and returns its stdout, stderr and error.
func (k *kubectl) try(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx := testContextFor(t, clusterTimeout)
	cmd := k.command(ctx, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	t.Logf("kubectl %s -> %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	return out.String(), errOut.String(), err
}

// background is a kubectl that runs until it exits or is stopped (get -w).
type background struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// start starts kubectl with args; it is killed when t ends if it has not
// exited.
func (k *kubectl) start(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := k.command(ctx, args...)
	b := &background{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	require.NoError(t, cmd.Start())
	go func() { b.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-b.done
		t.Logf("kubectl %s (background) wrote:\n%s", strings.Join(args, " "), b.out.String())
	})
	return b
}

// waitOutput waits until the output holds every one of subs, in order.
func (b *background) waitOutput(t *testing.T, subs ...string) string {
	t.Helper()
	deadline := time.After(clusterTimeout)
	for {
		changed := b.out.changed() // before reading: no write is missed
		out := b.out.String()
		if containsInOrder(out, subs...) {
			return out
		}
		select {
		case err := <-b.done:
			b.done <- err
			require.Failf(t, "kubectl exited", "before writing %q: %v; it wrote:\n%s", subs, err, b.out.String())
		case <-deadline:
			require.Failf(t, "kubectl did not write what was expected", "%q; it wrote:\n%s", subs, out)
		case <-changed:
		}
	}
}

// containsInOrder says whether s holds each of subs, each after the one
// before.
func containsInOrder(s string, subs ...string) bool {
	for _, sub := range subs {
		i := strings.Index(s, sub)
		if i < 0 {
			return false
		}
		s = s[i+len(sub):]
	}
	return true
}

// syncBuffer is a bytes.Buffer safe for concurrent use, which tells when
// it grows.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notify != nil {
		close(b.notify)
		b.notify = nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// changed returns a channel closed at the next write.
func (b *syncBuffer) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notify == nil {
		b.notify = make(chan struct{})
	}
	return b.notify
}
