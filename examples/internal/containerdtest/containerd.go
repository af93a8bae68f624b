package containerdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/examples/internal/mountinfo"
)

// Image names the harness imports.
const (
	PauseImage   = "podkit.test/pause:1"
	BusyboxImage = "podkit.test/busybox:1"
)

const (
	// bridgeName is the CNI bridge in the host's network namespace.
	bridgeName = "podkit-cni0"
	// Subnet is the pod network's address range (host-local IPAM). Pods get
	// addresses from it; nothing routes it off the machine.
	Subnet = "10.244.77.0/24"
	// pausePackage is the pause command, built for the sandbox image.
	pausePackage = "github.com/podkit/podkit/examples/internal/containerdtest/pause"
	// startTimeout bounds containerd's start and the image imports.
	startTimeout = 30 * time.Second
)

// Paths outside its directory that containerd 1.6 and the CNI plugins
// write to. Those that did not exist before the test are removed after it.
var hostPaths = []string{"/run/containerd", "/run/netns", "/var/lib/cni"}

// Containerd is a running containerd owned by one test.
type Containerd struct {
	// Dir holds containerd's root, state, config, socket, CNI config and
	// IPAM state, and the image tars.
	Dir string
	// Endpoint is the CRI endpoint, "unix://<Dir>/containerd.sock".
	Endpoint string
	// Client is a CRI client connected to it.
	Client *cri.Client

	socket  string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	// existed records which host paths and whether the bridge existed
	// before the test.
	existed map[string]bool
}

// Start starts containerd for t and registers its teardown with
// t.Cleanup. It skips t, saying why, unless it runs as root on Linux with
// containerd, ctr and runc on PATH, the CNI bridge, host-local and
// loopback plugins in /usr/lib/cni, /bin/busybox and the go command.
func Start(t *testing.T) *Containerd {
	t.Helper()
	if reason := missing(); reason != "" {
		t.Skipf("skipping the containerd integration test: %s (CI's .ci/run installs containerd, runc, containernetworking-plugins and busybox-static, and runs it as root)", reason)
	}
	if testing.Short() {
		t.Skip("skipping the containerd integration test in -short mode")
	}
	lockHost(t)
	dir := t.TempDir()
	c := &Containerd{
		Dir:     dir,
		socket:  filepath.Join(dir, "containerd.sock"),
		exited:  make(chan struct{}),
		existed: map[string]bool{},
	}
	c.Endpoint = "unix://" + c.socket
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		c.existed[p] = err == nil
	}
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		t.Fatalf("containerdtest: the bridge %s already exists; is another test run using it?", bridgeName)
	}

	if err := c.writeFiles(); err != nil {
		t.Fatal(err)
	}
	pauseTar, busyboxTar, err := c.buildImages()
	if err != nil {
		t.Fatal(err)
	}

	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := c.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("containerdtest: starting containerd: %v", err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	t.Cleanup(func() { c.teardown(t) })

	if c.Client, err = cri.Dial(c.Endpoint); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	version, err := c.waitReady(ctx)
	if err != nil {
		t.Fatalf("containerdtest: %v\n%s", err, c.Log())
	}
	for _, tarball := range []string{pauseTar, busyboxTar} {
		out, err := exec.CommandContext(ctx, "ctr", "--address", c.socket, "-n", "k8s.io", "images", "import", tarball).CombinedOutput()
		if err != nil {
			t.Fatalf("containerdtest: importing %s: %v\n%s", tarball, err, out)
		}
	}
	for _, img := range []string{PauseImage, BusyboxImage} {
		resp, err := c.Client.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: img}, false)
		if err != nil || resp.GetImage() == nil {
			t.Fatalf("containerdtest: the CRI does not see image %s after the import (err %v)", img, err)
		}
	}
	t.Logf("containerd %s (CRI %s) ready with images %s and %s in %v", version.GetRuntimeVersion(), version.GetRuntimeApiVersion(),
		PauseImage, BusyboxImage, time.Since(start).Round(time.Millisecond))
	return c
}

// HostAddress is the address ReachPods gives the host on the pod bridge:
// the subnet's first, which host-local IPAM keeps for the gateway and never
// hands to a pod.
const HostAddress = "10.244.77.1/24"

// ReachPods lets the host reach the pods' addresses, for tests that probe
// or call pods from the test process (probes, httpGet hooks): it creates
// the pod bridge ahead of the CNI plugin, which then uses it, with
// HostAddress on it, so the host routes the subnet there. Nothing is
// forwarded or masqueraded: the subnet stays on this machine. Call it
// before the first pod sandbox runs; the teardown deletes the bridge as it
// does the plugin's.
func (c *Containerd) ReachPods() error {
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		return fmt.Errorf("containerdtest: ReachPods: the bridge %s exists already (call it before the first pod runs)", bridgeName)
	}
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", HostAddress, "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("containerdtest: ReachPods: ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// lockHost serializes the tests that use this package across processes
// (go test runs packages in parallel, and engineers run tests at once):
// they share the bridge name and containerd's paths in /run. The lock is
// an flock on the CNI bridge plugin binary, which leaves no file behind;
// it is released when t ends.
func lockHost(t *testing.T) {
	t.Helper()
	f, err := os.Open("/usr/lib/cni/bridge")
	if err != nil {
		t.Fatalf("containerdtest: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("containerdtest: locking %s: %v", f.Name(), err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// missing says what the test needs and does not have, or "".
func missing() string {
	if runtime.GOOS != "linux" {
		return "not on Linux"
	}
	if os.Geteuid() != 0 {
		return "not running as root"
	}
	for _, bin := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not on PATH"
		}
	}
	for _, f := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback", "/bin/busybox"} {
		if _, err := os.Stat(f); err != nil {
			return f + " is missing"
		}
	}
	if goCommand() == "" {
		return "the go command is not found (it builds the pause image)"
	}
	return ""
}

func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// writeFiles writes containerd's config and the CNI network config.
func (c *Containerd) writeFiles() error {
	netDir := filepath.Join(c.Dir, "cni", "net.d")
	if err := os.MkdirAll(netDir, 0o755); err != nil {
		return err
	}
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
`, filepath.Join(c.Dir, "root"), filepath.Join(c.Dir, "state"), c.socket, c.socket+".ttrpc", PauseImage, netDir)
	if err := os.WriteFile(filepath.Join(c.Dir, "config.toml"), []byte(config), 0o644); err != nil {
		return err
	}
	// A bridge with host-local addresses and nothing else: no gateway (so
	// no IP forwarding is switched on), no masquerading, no route off the
	// machine. IPAM state stays in the test's directory.
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "podkit-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "dataDir": %q
      }
    }
  ]
}
`, bridgeName, Subnet, filepath.Join(c.Dir, "cni", "ipam"))
	return os.WriteFile(filepath.Join(netDir, "10-podkit-test.conflist"), []byte(conflist), 0o644)
}

// buildImages builds the pause binary and writes both image tars.
func (c *Containerd) buildImages() (pauseTar, busyboxTar string, err error) {
	pauseBin := filepath.Join(c.Dir, "pause")
	build := exec.Command(goCommand(), "build", "-o", pauseBin, pausePackage)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("containerdtest: building the pause binary: %v\n%s", err, out)
	}
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		return "", "", err
	}
	pauseTar = filepath.Join(c.Dir, "pause.tar")
	if err := WriteImage(pauseTar, Image{
		Name:       PauseImage,
		Files:      []File{{Path: "/pause", Mode: 0o755, Body: pause}},
		Entrypoint: []string{"/pause"},
	}); err != nil {
		return "", "", err
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", "", err
	}
	files := []File{{Path: "/bin/busybox", Mode: 0o755, Body: busybox}}
	for _, applet := range []string{"sh", "sleep", "echo", "cat", "true", "false", "ls", "ps", "kill", "hostname", "ip", "env"} {
		files = append(files, File{Path: "/bin/" + applet, Link: "busybox"})
	}
	files = append(files, File{Path: "/tmp/.keep", Mode: 0o644})
	busyboxTar = filepath.Join(c.Dir, "busybox.tar")
	err = WriteImage(busyboxTar, Image{Name: BusyboxImage, Files: files, Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}})
	return pauseTar, busyboxTar, err
}

// waitReady polls until the CRI answers Version, containerd exits, or ctx
// ends.
func (c *Containerd) waitReady(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		if fileExists(c.socket) {
			callCtx, cancel := context.WithTimeout(ctx, time.Second)
			v, err := c.Client.Version(callCtx)
			cancel()
			if err == nil {
				return v, nil
			}
			lastErr = err
		}
		select {
		case <-c.exited:
			return nil, fmt.Errorf("containerd exited during start: %v", c.waitErr)
		case <-ctx.Done():
			return nil, fmt.Errorf("containerd did not answer on %s in time (last error: %v)", c.socket, lastErr)
		case <-tick.C:
		}
	}
}

// Log returns containerd's log so far.
func (c *Containerd) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "containerd.log"))
	return string(b)
}

// teardown removes every pod, stops containerd, and removes what it made
// outside Dir. Leftovers of the test are errors.
func (c *Containerd) teardown(t *testing.T) {
	if c.Client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		if n, err := c.removeAllPods(ctx); err != nil {
			t.Errorf("containerdtest: removing the pods left in containerd: %v", err)
		} else if n > 0 {
			t.Errorf("containerdtest: the test left %d pod sandbox(es) in containerd; removed them", n)
		}
		cancel()
		c.Client.Close()
	}

	select {
	case <-c.exited:
		t.Errorf("containerdtest: containerd exited before the end of the test: %v\n%s", c.waitErr, c.Log())
	default:
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(15 * time.Second):
			t.Errorf("containerdtest: containerd (pid %d) did not stop on SIGTERM; killing it", c.cmd.Process.Pid)
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}

	for _, pid := range processesMentioning(c.Dir) {
		t.Errorf("containerdtest: process %d (%s) outlived containerd; killing it", pid, cmdline(pid))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		if out, err := exec.Command("ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			t.Errorf("containerdtest: deleting the bridge %s: %v\n%s", bridgeName, err, out)
		}
	}
	for _, m := range mountsUnder(append([]string{c.Dir}, hostPaths...)) {
		t.Errorf("containerdtest: %s is still mounted; unmounting it", m)
		_ = detachMount(m)
	}
	for _, p := range hostPaths {
		if c.existed[p] {
			continue
		}
		if p == "/run/netns" {
			if entries, _ := os.ReadDir(p); len(entries) > 0 {
				t.Errorf("containerdtest: network namespaces left in /run/netns: %d", len(entries))
			}
		}
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("containerdtest: removing %s: %v", p, err)
		}
	}
}

// removeAllPods stops and removes every container and sandbox in the k8s.io
// namespace, and says how many sandboxes there were.
func (c *Containerd) removeAllPods(ctx context.Context) (int, error) {
	var errs []error
	containers, err := c.Client.ListContainers(ctx, nil)
	if err != nil {
		return 0, err
	}
	for _, ctr := range containers {
		errs = append(errs, c.Client.StopContainer(ctx, ctr.GetId(), 0), c.Client.RemoveContainer(ctx, ctr.GetId()))
	}
	sandboxes, err := c.Client.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, err
	}
	for _, sb := range sandboxes {
		errs = append(errs, c.Client.StopPodSandbox(ctx, sb.GetId()), c.Client.RemovePodSandbox(ctx, sb.GetId()))
	}
	return len(sandboxes), errors.Join(errs...)
}

// processesMentioning returns the PIDs whose command line contains s (the
// shims name containerd's socket in Dir).
func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if strings.Contains(cmdline(pid), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
}

// mountsUnder returns the mount points at or under any of roots, deepest
// first.
func mountsUnder(roots []string) []string {
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range mounts {
		for _, r := range roots {
			if m.MountPoint == r || strings.HasPrefix(m.MountPoint, r+"/") {
				out = append(out, m.MountPoint)
				break
			}
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
