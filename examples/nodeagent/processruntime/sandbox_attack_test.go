package processruntime_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podkit/podkit/examples/internal/podrangetest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The attacks issue 20 tried on the process runtime, made again by pods of
// the runtime itself. Each needs the sandbox, so each is skipped, saying
// why, where the machine has none.

// sandboxed opens a runtime over a state directory outside /tmp (a pod's
// /tmp is its own, so a state directory there would be out of reach for
// that reason alone) and skips the test without sandboxes. With
// PODKIT_TEST_STAGES naming a build of cmd/podkit-stages, the runtime
// runs its stages from it (Options.StageExecutable), so the tests check
// the sandbox it builds too.
func sandboxed(t *testing.T, opts processruntime.Options) *processruntime.Runtime {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = sandboxStateDir(t)
	}
	if opts.StageExecutable == "" {
		opts.StageExecutable = os.Getenv("PODKIT_TEST_STAGES")
	}
	rt := openRuntime(t, opts)
	if c := rt.Containment(); !c.Sandbox {
		t.Skipf("no sandbox on this machine: %s", c.SandboxFallback)
	}
	return rt
}

// sandboxStateDir makes a state directory outside /tmp (see sandboxed),
// removed when the test ends.
func sandboxStateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "podkit-sandbox-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "state")
}

// runToEnd runs pod until its container "c" exits and returns its log.
func runToEnd(t *testing.T, rt *processruntime.Runtime, ev *events, pod *v1.Pod) string {
	t.Helper()
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "the attacker's exit", exitedEvent(pod.UID, "c", 1))
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	if c, _ := status(t, rt, pod.UID).Container("c"); c.Exit != nil && c.Exit.Reason == processruntime.ReasonStartError {
		t.Fatalf("the pod's container did not start: %s", c.Exit.Message)
	}
	return readLogs(t, rt, pod.UID, "c", processruntime.LogOptions{})
}

func shellPod(script string) *v1.Pod {
	return newPod(v1.RestartPolicyNever, "c", script)
}

// The first attack: a pod walks up from its scratch directory and reads
// the agent's kubeconfig and keys. It finds neither them nor another
// pod's files; host root's own keys it cannot read even where it sees
// them.
func TestAttackAPodSearchingForKeysAndKubeconfigsFindsNothing(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("/var/tmp", "podkit-agent-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	pki := filepath.Join(base, "pki")
	require.NoError(t, os.MkdirAll(pki, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pki, "apiserver-kubelet-client.key"), []byte("MARKER-kubelet-client-key\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(pki, "sa.key"), []byte("MARKER-sa-key\n"), 0o600))
	kubeconfig := filepath.Join(base, "admin.kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte("client-key-data: MARKER-admin\n"), 0o644))
	hostKey := filepath.Join(base, "host-root-only.key")
	require.NoError(t, os.WriteFile(hostKey, []byte("MARKER-host-root\n"), 0o600))

	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add, Masks: []string{pki, kubeconfig}})
	stateDir := filepath.Dir(filepath.Dir(rt.PodDir("x")))
	// Another pod, with a secret in its scratch directory.
	victim := shellPod(`echo MARKER-victim > secret; exec sleep 300`)
	_, err = syncPod(rt, victim)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, victim, 1) })
	eventually(t, 10*time.Second, "the victim wrote its secret", func() bool {
		_, err := os.Stat(filepath.Join(rt.PodDir(victim.UID), "scratch", "secret"))
		return err == nil
	})

	attacker := shellPod(`cd ../../..; echo "walked up to $(pwd)"; ls -A ` + stateDir + ` 2>&1 | head -3;
find / -xdev \( -path /proc -o -path /sys -o -path /usr -o -path /work -o -path /root/go -o -path /root/.cache \) -prune -o \( -name '*.key' -o -name '*kubeconfig*' -o -name '*.conf' -o -name secret \) -print 2>/dev/null > /tmp/found
echo "searched $(wc -l < /tmp/found) files"; grep -H "^" $(grep -e key -e kubeconfig -e secret /tmp/found) 2>&1; xargs grep -h MARKER < /tmp/found 2>/dev/null; echo done`)
	out := runToEnd(t, rt, ev, attacker)
	t.Log(out)
	assert.NotContains(t, out, "MARKER", "the pod read a secret")
	assert.Contains(t, out, hostKey+": Permission denied", "outside the masks the pod sees the host's key, but reads nothing of host root's")
	assert.NotContains(t, out, "apiserver-kubelet-client.key", "the masked PKI directory shows empty")
	assert.True(t, strings.HasSuffix(out, "done\n"), out)
}

// The second: a pod reads every process's environment and another pod's
// files. It sees only its own pod's processes.
func TestAttackAPodReadsNoOtherPodsEnvironmentOrFiles(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add})
	victim := newPod(v1.RestartPolicyNever, "c", `echo MARKER-file > secret; exec sleep 300`)
	victim.Spec.Containers[0].Env = []v1.EnvVar{{Name: "DB_PASSWORD", Value: "MARKER-env"}}
	_, err := syncPod(rt, victim)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, victim, 1) })
	secret := filepath.Join(rt.PodDir(victim.UID), "scratch", "secret")
	eventually(t, 10*time.Second, "the victim runs", func() bool { _, err := os.Stat(secret); return err == nil })

	out := runToEnd(t, rt, ev, shellPod(`for e in /proc/[0-9]*/environ; do tr '\0' '\n' < $e; done 2>/dev/null | grep MARKER; ls -d /proc/[0-9]* | wc -l; cat `+secret+` 2>&1; echo done`))
	t.Log(out)
	assert.NotContains(t, out, "MARKER")
	assert.Regexp(t, "(No such file or directory|Permission denied)", out, "the other pod's directory is out of this pod's reach")
	n, err := strconv.Atoi(strings.TrimSpace(strings.Split(out, "\n")[0]))
	require.NoError(t, err, out)
	assert.LessOrEqual(t, n, 5, "the pod's /proc shows its own processes only")
}

// id inside pods, with and without a securityContext; and what the pod's
// root is on the host.
func TestAttackIDInsidePods(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add})
	out := runToEnd(t, rt, ev, shellPod(`id; cat /proc/self/uid_map`))
	assert.Contains(t, out, "uid=0(root) gid=0(root)", "without securityContext: root, of the pod's user namespace")
	fields := strings.Fields(strings.Split(out, "\n")[1])
	require.Len(t, fields, 3, out)
	mapped := shellPod(`cat /proc/self/uid_map`)
	hostUID, hostGID, err := rt.MapIDs(mapped, 1000, 2000)
	require.NoError(t, err)
	assert.Equal(t, hostUID-1000, hostGID-2000)
	assert.Equal(t, strconv.Itoa(hostUID-1000), strings.Fields(runToEnd(t, rt, ev, mapped))[1], "the range MapIDs gave a volume manager is the pod's")
	assert.Equal(t, "0", fields[0])
	host, err := strconv.ParseUint(fields[1], 10, 32)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, host, uint64(processruntime.DefaultIDBase), "the pod's root is an unprivileged host ID")
	assert.Equal(t, "65536", fields[2])

	pod := shellPod(`id -u; id -g; id -G; exec sleep 300`)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr[int64](1000), RunAsGroup: ptr[int64](3000), SupplementalGroups: []int64{4000}, FSGroup: ptr[int64](2000)}
	_, err = syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	waitLog(t, rt, pod.UID, "c", "1000\n3000\n3000 2000 4000\n")
	c, _ := status(t, rt, pod.UID).Container("c")
	st, err := os.ReadFile("/proc/" + strconv.Itoa(c.PID) + "/status")
	require.NoError(t, err)
	assert.Regexp(t, `Uid:\t(\d+)\t`, string(st))
	assert.NotContains(t, string(st), "Uid:\t1000\t", "runAsUser 1000 is not the host's user 1000")
}

// readOnlyRootFilesystem: the root (and /tmp) refuse writes; volumes take
// them.
func TestAttackReadOnlyRootFilesystem(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add})
	pod := shellPod(`echo x > /escape && echo root-written; echo x > /tmp/x && echo tmp-written; echo x > /data/x && echo volume-written; echo done`)
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ReadOnlyRootFilesystem: ptr(true)}
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	out := runToEnd(t, rt, ev, pod)
	assert.NotContains(t, out, "root-written")
	assert.NotContains(t, out, "tmp-written")
	assert.Contains(t, out, "Read-only file system")
	assert.Contains(t, out, "volume-written")
	_, err := os.Stat("/escape")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// A bounded fork storm stops at the pod's pids limit, and the pod still
// stops cleanly.
func TestAttackAForkStormStopsAtThePidsLimit(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	const limit = 40
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add, PodPidsLimit: limit})
	if rt.Containment().Limits.Pids == "" {
		t.Skip("this machine can bound no pod's processes")
	}
	// The storm forks until a fork fails (the shell then ends), at most
	// 200 times; what follows uses builtins only, forking nothing.
	pod := newPod(v1.RestartPolicyNever, "c", `sh -c 'i=0; while [ $i -lt 200 ]; do sleep 300 & i=$((i+1)); echo $i > /tmp/n; done' 2>/dev/null; read n < /tmp/n; echo "stormed $n"; exec sleep 300`)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	waitLog(t, rt, pod.UID, "c", "stormed ")
	n := len(processes(t, pod.UID))
	t.Logf("the storm left %d processes in the pod (limit %d, through %s)", n, limit, rt.Containment().Limits.Pids)
	assert.LessOrEqual(t, n, limit)
	assert.Greater(t, n, limit/2, "the storm did fork up to near the limit")
	start := time.Now()
	terminate(t, rt, pod, 1)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Empty(t, processes(t, pod.UID))
}

// Two pods with the same runAsUser are two host users: even through a
// host directory both mount, neither reads what the other keeps to
// itself.
func TestAttackTwoPodsWithTheSameRunAsUserCannotReadEachOther(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add, AllowHostAccess: true})
	shared := t.TempDir()
	require.NoError(t, os.Chmod(shared, 0o777))
	withShared := func(p *v1.Pod) *v1.Pod {
		p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr[int64](1000)}
		p.Spec.Volumes = []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: shared}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
		return p
	}
	owner := withShared(shellPod(`umask 077; echo MARKER-mine > /shared/mine; id -u`))
	out := runToEnd(t, rt, ev, owner)
	assert.Equal(t, "1000\n", out)
	other := withShared(shellPod(`id -u; cat /shared/mine 2>&1; echo x >> /shared/mine 2>&1; echo done`))
	out = runToEnd(t, rt, ev, other)
	assert.NotContains(t, out, "MARKER")
	assert.Contains(t, out, "Permission denied")
	var st1 os.FileInfo
	st1, err := os.Stat(filepath.Join(shared, "mine"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st1.Mode().Perm())
}

// runAsNonRoot and a container that would run as root: it waits with the
// kubelet's reason and message, and an event; it never runs.
func TestAttackRunAsNonRootRefusesRoot(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add})
	pod := shellPod(`echo ran`)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr(true)}
	_, err := syncPod(rt, pod)
	require.ErrorIs(t, err, processruntime.ErrCreateContainerConfig)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	want := fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: c)", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")")
	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	require.Len(t, api.ContainerStatuses, 1)
	require.NotNil(t, api.ContainerStatuses[0].State.Waiting)
	assert.Equal(t, "CreateContainerConfigError", api.ContainerStatuses[0].State.Waiting.Reason)
	assert.Equal(t, want, api.ContainerStatuses[0].State.Waiting.Message)
	assert.Equal(t, v1.PodPending, api.Phase)
	failed := ev.wait(t, "the Failed event", func(e processruntime.Event) bool { return e.Type == processruntime.ContainerFailed && e.UID == pod.UID })
	assert.Equal(t, want, failed.Message)
	assert.Empty(t, containerProcesses(t, pod.UID), "nothing of the container ran")
	_, err = syncPod(rt, pod)
	require.ErrorIs(t, err, processruntime.ErrCreateContainerConfig, "retried, still refused")
	assert.Equal(t, 1, ev.count(func(e processruntime.Event) bool { return e.Type == processruntime.ContainerFailed && e.UID == pod.UID }), "the event is not repeated at each retry")

	allowed := shellPod(`id -u`)
	allowed.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr[int64](1000)}
	assert.Equal(t, "1000\n", runToEnd(t, rt, ev, allowed))
}

// privileged, and the rest of what reaches the host, is refused without
// AllowHostAccess, with the reason admission gives; with it, privileged
// is the host's root.
func TestAttackPrivilegedIsRefusedWithoutTheOption(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{})
	for name, mutate := range map[string]func(*v1.Pod){
		"privileged":  func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr(true)} },
		"hostPID":     func(p *v1.Pod) { p.Spec.HostPID = true },
		"hostNetwork": func(p *v1.Pod) { p.Spec.HostNetwork = true },
		"hostIPC":     func(p *v1.Pod) { p.Spec.HostIPC = true },
		"hostUsers":   func(p *v1.Pod) { p.Spec.HostUsers = ptr(true) },
		"hostPath": func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}}}
		},
	} {
		pod := shellPod(`id`)
		mutate(pod)
		err := rt.ValidatePod(pod)
		require.Error(t, err, name)
		assert.Equal(t, processruntime.ReasonHostAccessNotAllowed, processruntime.RefusalReason(err), name)
		assert.Contains(t, err.Error(), "which this node does not allow", name)
		_, err = syncPod(rt, pod)
		assert.ErrorIs(t, err, processruntime.ErrUnsupported, "SyncPod refuses it too: %s", name)
	}

	ev := newEvents()
	host := sandboxed(t, processruntime.Options{OnEvent: ev.add, AllowHostAccess: true})
	pod := shellPod(`id -u; cat /proc/self/uid_map; grep CapEff /proc/self/status`)
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr(true)}
	require.NoError(t, host.ValidatePod(pod))
	out := runToEnd(t, host, ev, pod)
	assert.Regexp(t, `^0\n\s+0\s+0\s+4294967295\n`, out, "allowed, privileged is the host's root")
	assert.NotContains(t, out, "CapEff:\t0000000000000000")
}

// Capabilities dropped, no_new_privs, the RuntimeDefault filter: what a
// restricted Pod Security manifest asks for, honoured.
func TestAttackARestrictedContainerHasWhatItAsked(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add})
	pod := shellPod(`grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; unshare -U true 2>&1 || echo unshare-refused`)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr[int64](1000), SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: ptr(false), Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_BIND_SERVICE"}}}
	out := runToEnd(t, rt, ev, pod)
	assert.Contains(t, out, "CapEff:\t0000000000000000")
	assert.Contains(t, out, "CapBnd:\t0000000000000400", "the bounding set is NET_BIND_SERVICE alone")
	assert.Contains(t, out, "NoNewPrivs:\t1")
	assert.Contains(t, out, "Seccomp:\t2")
	assert.Contains(t, out, "unshare-refused")
}

// A pod's network: its own loopback; a service the host offers on its
// loopback is out of reach.
func TestAttackAPodCannotReachTheHostsLoopback(t *testing.T) {
	t.Parallel()
	needBusybox(t)
	ln := listenLoopback(t)
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add})
	out := runToEnd(t, rt, ev, shellPod(`busybox nc -w 2 127.0.0.1 `+ln+` </dev/null && echo reached || echo refused; ls /sys/class/net`))
	assert.Contains(t, out, "refused")
	assert.NotContains(t, out, "reached")
}

// listenLoopback listens on the host's 127.0.0.1 (a service such as
// podkit-cluster's etcd) until the test ends, and returns its port.
func listenLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// With a pod network, each pod has an address of the node's range: the
// node reaches a pod's server there, pods reach each other, and the host's
// loopback stays out of reach.
func TestAttackPodNetwork(t *testing.T) {
	needBusybox(t)
	t.Parallel()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip(8) to check the network with")
	}
	cidr := podrangetest.Range(t)
	bridge := podrangetest.Bridge(t, "pkr")
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add, PodCIDR: cidr, BridgeName: bridge})
	t.Cleanup(func() {
		require.NoError(t, rt.TeardownNetwork(context.Background()))
		out, _ := exec.Command("ip", "link", "show", bridge).CombinedOutput()
		assert.Contains(t, string(out), "does not exist", "the bridge is gone")
	})
	assert.Contains(t, rt.Containment().Network, "on bridge "+bridge)

	server := newPod(v1.RestartPolicyNever, "c", `mkdir -p /tmp/www; hostname > /tmp/www/index.html; exec busybox httpd -f -p 8080 -h /tmp/www`)
	_, err := syncPod(rt, server)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, server, 1) })
	st := status(t, rt, server.UID)
	require.Len(t, st.PodIPs, 1)
	ip := netip.MustParseAddr(st.PodIPs[0])
	assert.True(t, cidr.Contains(ip), "%s in %s", ip, cidr)
	api := processruntime.APIStatus(server, st)
	assert.Equal(t, ip.String(), api.PodIP)

	var body string
	eventually(t, 10*time.Second, "the node reaches the pod's server", func() bool {
		resp, err := http.Get("http://" + ip.String() + ":8080/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	})
	assert.Equal(t, server.Name+"\n", body, "the pod's hostname")

	port := listenLoopback(t)
	out := runToEnd(t, rt, ev, shellPod(`printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 5 `+ip.String()+` 8080 | tail -1 && echo pod-reached; busybox nc -w 2 127.0.0.1 `+port+` </dev/null && echo loopback-reached || echo loopback-refused; ip -4 -o addr show eth0`))
	assert.Contains(t, out, server.Name+"\n", "pods reach each other")
	assert.Contains(t, out, "pod-reached")
	assert.Contains(t, out, "loopback-refused")
	assert.NotContains(t, out, "loopback-reached")
	assert.Contains(t, out, cidr.Masked().Addr().String()[:len(cidr.Masked().Addr().String())-1])

	// Even with NET_ADMIN (of its user namespace): the pod network's
	// namespace is the host's user namespace's.
	spoofer := shellPod(`ip addr add ` + ip.String() + `/24 dev eth0 2>&1 || echo not-allowed`)
	spoofer.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}}}
	change := runToEnd(t, rt, ev, spoofer)
	assert.Contains(t, change, "not-allowed", "the pod's root cannot take another pod's address")
}

// A pod's memory and cpu limits, and its pids limit, are written to the
// cgroups of the controllers the machine has.
func TestPodLimitsReachTheCgroups(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add, PodPidsLimit: 77})
	lim := rt.Containment().Limits
	t.Logf("limits: %+v, missing %v", lim, lim.Missing())
	pod := newPod(v1.RestartPolicyNever, "c", "exec sleep 300")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("96Mi"), v1.ResourceCPU: resource.MustParse("250m")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
	}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	c, _ := status(t, rt, pod.UID).Container("c")
	require.NotZero(t, c.PID)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.PID) + "/cgroup")
	require.NoError(t, err)
	files := map[string]map[string]string{
		"cgroup v1": {"pids": "pids.max=77", "memory": "memory.limit_in_bytes=100663296", "cpu": "cpu.cfs_quota_us=25000"},
	}[lim.Pids]
	if files == nil {
		t.Skipf("this test reads cgroup v1 files; the pods' pids are limited through %q", lim.Pids)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for ctrl, want := range files {
			if parts[1] != ctrl {
				continue
			}
			file, value, _ := strings.Cut(want, "=")
			got, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, parts[2], file))
			require.NoError(t, err)
			assert.Equal(t, value, strings.TrimSpace(string(got)), "%s of the pod", file)
			checked++
		}
	}
	assert.Equal(t, len(files), checked, "the container is in the pod's cgroup of each controller: %s", b)
}
