//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// requireSandbox skips the test where a sandbox cannot be built: it needs
// root (to map a range of host IDs) and user namespaces.
func requireSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (it maps a range of host IDs onto the pod's user namespace)")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skip("user namespaces are not available")
	}
}

// testHostID picks a range of host IDs for a test's pod, well away from
// any the machine uses.
func testHostID() uint32 { return 1<<31 + uint32(rand.IntN(1<<14))*sandbox.IDsPerPod }

// newSpawner returns a Spawner of the test binary's stages, closed when
// the test ends.
func newSpawner(t *testing.T) *sandbox.Spawner {
	t.Helper()
	s, err := sandbox.NewSpawner(sandbox.SpawnerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// pod is a sandbox started for a test.
type pod struct {
	t    *testing.T
	pid  int
	conn *sandbox.Conn
	cfg  sandbox.Config
	seq  int
}

// startPod starts a sandbox for cfg (StageDir and HostID filled in when
// empty) and stops it when the test ends.
func startPod(t *testing.T, cfg sandbox.Config) *pod {
	t.Helper()
	requireSandbox(t)
	dir := t.TempDir()
	if cfg.StageDir == "" {
		cfg.StageDir = filepath.Join(dir, "stage")
		require.NoError(t, os.Mkdir(cfg.StageDir, 0o700))
	}
	if cfg.HostID == 0 && !cfg.Privileged {
		cfg.HostID = testHostID()
	}
	if cfg.Name == "" {
		cfg.Name = "test/" + t.Name()
	}
	log, err := os.Create(filepath.Join(dir, "sandbox.log"))
	require.NoError(t, err)
	defer log.Close()
	socket := filepath.Join(dir, "init.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid, err := newSpawner(t).Start(ctx, &cfg, sandbox.Launch{Socket: socket, Log: log})
	if err != nil {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("starting the sandbox: %v\nlog:\n%s", err, b)
	}
	conn, err := sandbox.Dial(socket)
	require.NoError(t, err)
	p := &pod{t: t, pid: pid, conn: conn, cfg: cfg}
	t.Cleanup(func() {
		conn.Close()
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	})
	return p
}

// run runs spec in the pod to its end and returns its output (stdout and
// stderr together) and exit.
func (p *pod) run(spec sandbox.ProcessSpec) (string, sandbox.ExitStatus) {
	p.t.Helper()
	out, st, err := p.try(spec)
	require.NoError(p.t, err)
	return out, st
}

// try is run, returning the error of Create or Start.
func (p *pod) try(spec sandbox.ProcessSpec) (string, sandbox.ExitStatus, error) {
	p.t.Helper()
	if spec.Capabilities == 0 {
		spec.Capabilities = sandbox.DefaultCapabilities
	}
	p.seq++
	name := "p" + strconv.Itoa(p.seq)
	r, w, err := os.Pipe()
	require.NoError(p.t, err)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = p.conn.Create(ctx, name, &spec, sandbox.Stdio{Stdout: w, Stderr: w})
	w.Close()
	if err != nil {
		return "", sandbox.ExitStatus{}, err
	}
	if err := p.conn.Start(ctx, name); err != nil {
		return "", sandbox.ExitStatus{}, err
	}
	out, err := io.ReadAll(io.LimitReader(r, 1<<20))
	require.NoError(p.t, err)
	st, err := p.conn.Wait(ctx, name)
	require.NoError(p.t, err)
	require.NoError(p.t, p.conn.Forget(ctx, name))
	return string(out), st, nil
}

func sh(script string) sandbox.ProcessSpec {
	return sandbox.ProcessSpec{Args: []string{"sh", "-c", script}, Env: []string{"PATH=" + sandbox.DefaultPath}}
}

func TestIdentityInsideAndOnTheHost(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{Hostname: "web-0"})
	out, st := p.run(sh(`id; hostname; grep -E '^(Uid|Gid)' /proc/self/status`))
	assert.Equal(t, 0, st.Code, out)
	assert.Contains(t, out, "uid=0(root) gid=0(root) groups=0(root)")
	assert.Contains(t, out, "web-0\n")

	spec := sh(`id -u; id -g; id -G`)
	spec.UID, spec.GID, spec.Groups = 1000, 3000, []uint32{3000, 2000}
	out, st = p.run(spec)
	assert.Equal(t, 0, st.Code, out)
	assert.Equal(t, "1000\n3000\n3000 2000\n", out)

	// On the host, the pod's root is the range's first ID, not root.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	proc, err := p.conn.Create(ctx, "sleeper", &sandbox.ProcessSpec{Args: []string{"sleep", "100"}, Env: []string{"PATH=" + sandbox.DefaultPath}, Capabilities: sandbox.DefaultCapabilities}, sandbox.Stdio{Stdout: w, Stderr: w})
	w.Close()
	require.NoError(t, err)
	require.NoError(t, p.conn.Start(ctx, "sleeper"))
	status, err := os.ReadFile("/proc/" + strconv.Itoa(proc.HostPID) + "/status")
	require.NoError(t, err)
	assert.Contains(t, string(status), "Uid:\t"+strconv.Itoa(int(p.cfg.HostID)))
	require.NoError(t, p.conn.Signal(ctx, "sleeper", syscall.SIGKILL))
	st, err = p.conn.Wait(ctx, "sleeper")
	require.NoError(t, err)
	assert.Equal(t, sandbox.ExitStatus{Code: 137, Signal: 9}, st)
}

func TestProcShowsOnlyThePod(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{})
	out, st := p.run(sh(`ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/1/cmdline | tr '\0' ' '; echo; cat /proc/1/environ || echo environ-refused`))
	assert.Equal(t, 0, st.Code, out)
	t.Log(out)
	lines := strings.Split(out, "\n")
	n, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	require.NoError(t, err, out)
	// The init, sh, and what sh runs in the pipeline: nothing of the host.
	assert.LessOrEqual(t, n, 5, out)
	assert.Contains(t, out, "environ-refused", "the init's environ is not readable: it is not dumpable")
	assert.Contains(t, out, "podkit-sandbox-init")
}

func TestTheHostsSecretsAreOutOfReach(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	// An agent's state directory outside /tmp (the pod's /tmp is its own
	// anyway): a kubeconfig and keys readable by anyone, and a key only
	// host root may read, outside any mask.
	base, err := os.MkdirTemp("/var/tmp", "podkit-sandbox-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	state := filepath.Join(base, "agent")
	require.NoError(t, os.MkdirAll(filepath.Join(state, "pki"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(state, "kubeconfig"), []byte("client-key-data: MARKER-1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(state, "pki", "apiserver.key"), []byte("MARKER-2\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(base, "root-only.key"), []byte("MARKER-3\n"), 0o600))
	require.NoError(t, os.Chmod(base, 0o755))
	cred := filepath.Join(base, "admin.conf")
	require.NoError(t, os.WriteFile(cred, []byte("MARKER-4\n"), 0o644))

	p := startPod(t, sandbox.Config{Masks: []string{state, cred}})
	out, st := p.run(sh(`find ` + base + ` /etc /root /var/tmp /run /tmp /home -xdev -type f 2>/dev/null | xargs grep -h MARKER 2>/dev/null; ls -A ` + state + `; cat ` + base + `/root-only.key; echo done`))
	assert.Equal(t, 0, st.Code, out)
	t.Log(out)
	assert.NotContains(t, out, "MARKER", "no planted secret is readable")
	assert.Contains(t, out, "Permission denied", "a root-only key is the host root's, not the pod's root's")
	assert.True(t, strings.HasSuffix(out, "done\n"), out)
}

func TestTheRootIsReadOnlyForTheHostAndPrivateForThePod(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{})
	marker := "podkit-sandbox-" + strconv.Itoa(rand.Int())
	out, st := p.run(sh(`echo x > /etc/` + marker + ` || echo etc-refused; echo y > /var/tmp/` + marker + ` && echo var-tmp-private; echo z > /` + marker + ` && echo root-private; echo w > /tmp/x && echo tmp-ok`))
	assert.Equal(t, 0, st.Code, out)
	assert.Contains(t, out, "etc-refused")
	assert.Contains(t, out, "var-tmp-private")
	assert.Contains(t, out, "root-private")
	assert.Contains(t, out, "tmp-ok")
	for _, host := range []string{"/etc/" + marker, "/var/tmp/" + marker, "/" + marker} {
		_, err := os.Stat(host)
		assert.ErrorIs(t, err, os.ErrNotExist, "the pod's write reached the host at %s", host)
	}

	spec := sh(`echo x > /` + marker + ` || echo root-refused; echo x > /tmp/y || echo tmp-refused; echo x > /dev/shm/y && echo shm-ok`)
	spec.ReadOnlyRoot = true
	out, st = p.run(spec)
	assert.Equal(t, 0, st.Code, out)
	assert.Contains(t, out, "root-refused")
	assert.Contains(t, out, "tmp-refused")
	assert.Contains(t, out, "shm-ok")
}

func TestCapabilitiesNoNewPrivsAndSeccomp(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{})
	caps := sh(`grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; unshare -U true && echo unshare-allowed || echo unshare-refused`)
	out, st := p.run(caps)
	assert.Equal(t, 0, st.Code, out)
	assert.Contains(t, out, "CapEff:\t"+hex(sandbox.DefaultCapabilities))
	assert.Contains(t, out, "CapBnd:\t"+hex(sandbox.DefaultCapabilities))
	assert.Contains(t, out, "NoNewPrivs:\t0")
	assert.Contains(t, out, "Seccomp:\t0")
	assert.Contains(t, out, "unshare-allowed", "without a filter a user namespace may nest another")

	caps.Capabilities = sandbox.CapabilitySet(1) << 10 // NET_BIND_SERVICE only
	caps.NoNewPrivileges = true
	caps.Seccomp = sandbox.SeccompRuntimeDefault
	out, st = p.run(caps)
	assert.Equal(t, 0, st.Code, out)
	assert.Contains(t, out, "CapEff:\t0000000000000400")
	assert.Contains(t, out, "CapBnd:\t0000000000000400")
	assert.Contains(t, out, "NoNewPrivs:\t1")
	assert.Contains(t, out, "Seccomp:\t2")
	assert.Contains(t, out, "unshare-refused", "RuntimeDefault refuses new namespaces without CAP_SYS_ADMIN")

	// A user other than root keeps no capability across its execve, as
	// under containerd.
	caps.UID = 1000
	out, _ = p.run(caps)
	assert.Contains(t, out, "CapEff:\t0000000000000000")
}

func hex(c sandbox.CapabilitySet) string { return fmt.Sprintf("%016x", uint64(c)) }

func TestVolumesSubPathAndReadOnly(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	host := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(host, "sub"), 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(host, "sub", "f"), []byte("from the host\n"), 0o644))
	require.NoError(t, os.Chmod(host, 0o777))
	require.NoError(t, os.Symlink("/etc", filepath.Join(host, "escape")))
	p := startPod(t, sandbox.Config{
		Volumes:     []sandbox.Volume{{Name: "data", Source: host}, {Name: "mem", Memory: true, SizeLimit: 1 << 20}},
		MountPoints: []sandbox.MountPoint{{Path: "/data"}, {Path: "/ro"}, {Path: "/srv/mem"}},
	})
	spec := sh(`cat /ro/f; echo w > /ro/g || echo ro-refused; echo pod > /data/written && echo data-ok; df -k /srv/mem | tail -1; ls /.podkit`)
	spec.Mounts = []sandbox.Mount{
		{Volume: "data", Target: "/data"},
		{Volume: "data", SubPath: "sub", Target: "/ro", ReadOnly: true},
		{Volume: "mem", Target: "/srv/mem"},
	}
	out, st := p.run(spec)
	assert.Equal(t, 0, st.Code, out)
	assert.Contains(t, out, "from the host\n")
	assert.Contains(t, out, "ro-refused")
	assert.Contains(t, out, "data-ok")
	assert.Contains(t, out, " 1024 ", "the memory volume has its size limit")
	b, err := os.ReadFile(filepath.Join(host, "written"))
	require.NoError(t, err)
	assert.Equal(t, "pod\n", string(b))

	spec.Mounts = []sandbox.Mount{{Volume: "data", SubPath: "escape/..", Target: "/data"}}
	_, _, err = p.try(spec)
	assert.ErrorContains(t, err, `subPath "escape/.."`, "a link cannot lead a subPath out of its volume")
}

func TestTheNetworkIsThePodsAndExitsAreReported(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{})
	out, st := p.run(sh(`ls /sys/class/net; ls /dev; exit 7`))
	assert.Equal(t, sandbox.ExitStatus{Code: 7}, st)
	assert.Equal(t, "lo\n", strings.SplitAfter(out, "\n")[0], out)
	assert.NotContains(t, out, "sda")
	assert.NotContains(t, out, "vda")
	assert.Contains(t, out, "urandom")

	_, _, err := p.try(sandbox.ProcessSpec{Args: []string{"no-such-command"}, Env: []string{"PATH=/bin"}})
	assert.EqualError(t, err, `command "no-such-command" not found in PATH "/bin"`)
	_, _, err = p.try(sandbox.ProcessSpec{Args: []string{"true"}, Dir: "/nonexistent"})
	assert.EqualError(t, err, `working directory "/nonexistent" does not exist or is not a directory`)
}

func TestAReconnectedAgentLearnsWhatHappened(t *testing.T) {
	t.Parallel()
	p := startPod(t, sandbox.Config{})
	ctx := context.Background()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devNull.Close()
	for _, name := range []string{"runs", "ends"} {
		spec := sh(map[string]string{"runs": "exec sleep 100", "ends": "exit 3"}[name])
		spec.Capabilities = sandbox.DefaultCapabilities
		_, err := p.conn.Create(ctx, name, &spec, sandbox.Stdio{Stdout: devNull, Stderr: devNull})
		require.NoError(t, err)
		require.NoError(t, p.conn.Start(ctx, name))
	}
	_, err = p.conn.Wait(ctx, "ends")
	require.NoError(t, err)
	// The agent goes away and comes back.
	require.NoError(t, p.conn.Close())
	_, err = p.conn.List(ctx)
	assert.ErrorIs(t, err, sandbox.ErrGone)
	conn, err := sandbox.Dial(filepath.Join(filepath.Dir(p.cfg.StageDir), "init.sock"))
	require.NoError(t, err)
	defer conn.Close()
	procs, err := conn.List(ctx)
	require.NoError(t, err)
	byName := map[string]sandbox.ProcessState{}
	for _, ps := range procs {
		byName[ps.Name] = ps
	}
	assert.Equal(t, sandbox.StateRunning, byName["runs"].State)
	assert.Positive(t, byName["runs"].HostPID)
	assert.Equal(t, sandbox.StateExited, byName["ends"].State)
	assert.Equal(t, &sandbox.ExitStatus{Code: 3}, byName["ends"].Exit)
	st, err := conn.Wait(ctx, "ends")
	require.NoError(t, err)
	assert.Equal(t, 3, st.Code)
	require.NoError(t, conn.Forget(ctx, "ends"))
	assert.Error(t, conn.Forget(ctx, "runs"), "a running process cannot be forgotten")
}
