package virtualkubelet_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/podkit/podkit/examples/kube/clustertest"
)

// mockCommand is virtual-kubelet's own program, with its mock provider
// built in: this module's go.mod lists it as a tool, so the go command
// builds it from the module cache at the version the suite comes from.
const mockCommand = "github.com/virtual-kubelet/virtual-kubelet/cmd/virtual-kubelet"

// buildMock builds virtual-kubelet's program into a directory of the test
// and returns its path, or skips the test when it cannot be built here (no
// go command, a build that fails).
func buildMock(t testing.TB) string {
	t.Helper()
	return buildMockProgram(t)
}

// buildMockProgram builds virtual-kubelet's program as buildMock does,
// with extra arguments for go build (the scale benchmark's -overlay).
func buildMockProgram(t testing.TB, buildArgs ...string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("virtualkubelet: no go command to build virtual-kubelet's mock provider: %v", err)
	}
	out := filepath.Join(t.TempDir(), "virtual-kubelet")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, append(append([]string{"build", "-buildvcs=false", "-o", out}, buildArgs...), mockCommand)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		t.Skipf("virtualkubelet: building virtual-kubelet's mock provider (%s): %v\n%s", mockCommand, err, log.String())
	}
	return out
}

// mockAgent is the harness's agent for a node that virtual-kubelet's own
// program runs, with its mock provider: Run starts the program as the
// node and stops it (SIGTERM, then SIGKILL after 30s) when ctx ends.
type mockAgent struct {
	binary string
	// kubeconfig is the administrator's kubeconfig: the program labels
	// its Node kubernetes.io/role, which NodeRestriction refuses to a
	// node's own identity.
	kubeconfig string
	env        clustertest.NodeEnv
	// log receives the program's output.
	log *lockedBuffer
	// pods is the capacity in pods the mock provider reports; "200" when
	// empty.
	pods string
	// workers is the program's --pod-sync-workers; 8 when 0.
	workers int
	// started, when set, is called with the program's process ID once it
	// started.
	started func(pid int)
}

// Run runs the program until ctx ends, serving the kubelet API on every
// address at kubeletPort with the node's serving certificate (the API
// server checks it on the node proxy's requests), with no authentication
// of its callers (no client CA: virtual-kubelet's NoAuth). An exit before
// ctx ends is an error, with the program's output.
func (a mockAgent) Run(ctx context.Context) error {
	dir, err := os.MkdirTemp(a.env.StateDir, "mock-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := writeKeyPair(a.env.KubeletAPI.Certificate, certFile, keyFile); err != nil {
		return err
	}
	// The mock provider's capacity, per node name (its only configuration).
	config := filepath.Join(dir, "mock.json")
	pods := a.pods
	if pods == "" {
		pods = "200"
	}
	if err := os.WriteFile(config, []byte(`{"`+a.env.Name+`": {"cpu": "20", "memory": "100Gi", "pods": "`+pods+`"}}`), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(a.binary,
		"--provider", "mock",
		"--provider-config", config,
		"--nodename", a.env.Name,
		"--kubeconfig", a.kubeconfig,
		"--disable-taint",
		"--pod-sync-workers", strconv.Itoa(cmp.Or(a.workers, 8)),
		"--startup-timeout", "2m",
	)
	cmd.Env = append(os.Environ(),
		"APISERVER_CERT_LOCATION="+certFile,
		"APISERVER_KEY_LOCATION="+keyFile,
		"VKUBELET_POD_IP="+a.env.KubeletAPI.Address.String(),
		"KUBELET_PORT="+strconv.Itoa(kubeletPort),
	)
	cmd.Stdout, cmd.Stderr = a.log, a.log
	// Killed with the test process, should that die first. Linux sends
	// Pdeathsig when the thread that forked the child ends, and the
	// process runtime of this test process ends threads of its own: the
	// child is forked from a goroutine locked to its thread, which holds
	// it until the child has ended.
	cmd.SysProcAttr = dieWithTest()
	startErr := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		done <- cmd.Wait()
	}()
	if err := <-startErr; err != nil {
		return fmt.Errorf("starting virtual-kubelet's mock provider: %w", err)
	}
	if a.started != nil {
		a.started(cmd.Process.Pid)
	}
	select {
	case err := <-done:
		return fmt.Errorf("virtual-kubelet's mock provider exited: %v\n%s", err, a.log.String())
	case <-ctx.Done():
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return nil
}

// writeKeyPair writes cert's chain and private key as PEM files.
func writeKeyPair(cert tls.Certificate, certFile, keyFile string) error {
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
}

// lockedBuffer is a bytes.Buffer a child process's output goes to from
// exec's copying goroutines while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
