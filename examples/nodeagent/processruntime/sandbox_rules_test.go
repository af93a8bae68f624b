package processruntime

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// The rules of the sandbox that need no machine: ID ranges, pod limits,
// the merged securityContext and the subPathExpr expansion.

func TestIDRanges(t *testing.T) {
	registry := t.TempDir()
	stateA, stateB := t.TempDir(), t.TempDir()
	r, err := newIDRanges(0, 3, registry, stateA)
	require.NoError(t, err)
	a, err := r.allocate("a")
	require.NoError(t, err)
	b, err := r.allocate("b")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, []int{a, b}, "the lowest free slot")
	assert.Equal(t, uint32(DefaultIDBase), r.hostID(a))
	assert.Equal(t, uint32(DefaultIDBase+sandbox.IDsPerPod), r.hostID(b))
	again, err := r.allocate("b")
	require.NoError(t, err)
	assert.Equal(t, b, again, "a pod keeps its slot")

	// Another runtime of the machine: never a slot of the first's.
	other, err := newIDRanges(0, 3, registry, stateB)
	require.NoError(t, err)
	c, err := other.allocate("c")
	require.NoError(t, err)
	assert.Equal(t, 2, c, "slots 0 and 1 are the other runtime's pods'")
	_, err = other.allocate("d")
	assert.ErrorContains(t, err, "all 3 ranges of host IDs are in use")
	assert.ErrorContains(t, other.reserve(0, "d"), "is claimed by another pod", "never two pods'")

	r.releaseUID("a")
	d, err := other.allocate("d")
	require.NoError(t, err)
	assert.Equal(t, 0, d, "released by its pod's UID")

	// A restarted runtime takes its slots back; an emptied registry (a
	// reboot) is claimed again.
	restarted, err := newIDRanges(0, 3, registry, stateA)
	require.NoError(t, err)
	require.NoError(t, restarted.reserve(1, "b"))
	require.NoError(t, os.Remove(restarted.claimPath(1)))
	require.NoError(t, restarted.reserve(1, "b"))

	// A claim of a pod whose directory is gone is stale once old enough.
	old := time.Now().Add(-2 * idClaimGrace)
	require.NoError(t, os.Chtimes(other.claimPath(2), old, old))
	assert.True(t, restarted.stale(other.claimPath(2)), "pod c has no directory in its runtime's state")
	require.NoError(t, os.MkdirAll(filepath.Join(stateB, "pods", "d"), 0o700))
	require.NoError(t, os.Chtimes(other.claimPath(0), old, old))
	assert.False(t, restarted.stale(other.claimPath(0)), "pod d has its directory")
	e, err := restarted.allocate("e")
	require.NoError(t, err)
	assert.Equal(t, 2, e, "the stale claim was taken over")

	_, err = newIDRanges(1000, 0, registry, stateA)
	assert.ErrorContains(t, err, "would map host IDs below 65536")
	_, err = newIDRanges(1<<32-sandbox.IDsPerPod, 0, registry, stateA)
	assert.ErrorContains(t, err, "no range of 65536 IDs fits")
	_, err = newIDRanges(0, 40000, registry, stateA)
	assert.ErrorContains(t, err, "at most 32767 ranges")
}

func TestLimitsOf(t *testing.T) {
	q := resource.MustParse
	ctr := func(cpu, mem string) v1.Container {
		c := v1.Container{Resources: v1.ResourceRequirements{Limits: v1.ResourceList{}, Requests: v1.ResourceList{v1.ResourceCPU: q("100m")}}}
		if cpu != "" {
			c.Resources.Limits[v1.ResourceCPU] = q(cpu)
		}
		if mem != "" {
			c.Resources.Limits[v1.ResourceMemory] = q(mem)
		}
		return c
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr("500m", "64Mi"), ctr("1", "32Mi")}}}
	l := limitsOf(pod, 100)
	assert.Equal(t, podLimits{pids: 100, memory: 96 << 20, cpuQuota: 150000, cpuShares: 204}, l)

	pod.Spec.InitContainers = []v1.Container{ctr("2", "1Gi")}
	l = limitsOf(pod, 0)
	assert.Equal(t, int64(1<<30), l.memory, "the largest init container's, when larger than the sum")
	assert.Equal(t, int64(200000), l.cpuQuota)

	pod.Spec.Containers = append(pod.Spec.Containers, ctr("", ""))
	l = limitsOf(pod, 0)
	assert.Zero(t, l.memory, "a container without a limit: no pod limit")
	assert.Zero(t, l.cpuQuota)

	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q("128Mi")}}
	assert.Equal(t, int64(128<<20), limitsOf(pod, 0).memory, "pod-level resources win")
	assert.Equal(t, uint64(2), limitsOf(&v1.Pod{}, 0).cpuShares, "at least 2 shares")
	assert.Equal(t, uint64(1), cpuWeight(2))
	assert.Equal(t, uint64(10000), cpuWeight(262144))
	assert.Equal(t, uint64(39), cpuWeight(1024))
}

func TestEffectiveSecurityAndIdentity(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{
			RunAsUser: ptrTo[int64](1000), RunAsGroup: ptrTo[int64](1000), SupplementalGroups: []int64{5, 6}, FSGroup: ptrTo[int64](6),
			SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		}},
	}
	c := &v1.Container{Name: "c", Image: "img", SecurityContext: &v1.SecurityContext{
		RunAsUser: ptrTo[int64](2000), ReadOnlyRootFilesystem: ptrTo(true), AllowPrivilegeEscalation: ptrTo(false),
		Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_BIND_SERVICE", "CAP_CHOWN"}},
	}}
	s := effectiveSecurity(pod, c)
	assert.Equal(t, int64(2000), *s.runAsUser, "the container's wins")
	assert.Equal(t, int64(1000), *s.runAsGroup, "the pod's where the container sets none")
	assert.True(t, s.readOnlyRoot)
	assert.True(t, s.noNewPrivileges)
	assert.Equal(t, v1.SeccompProfileTypeRuntimeDefault, s.seccomp.Type)
	assert.Equal(t, "CHOWN,NET_BIND_SERVICE", s.capabilities().String())

	r := &Runtime{}
	uid, gid, groups, waiting := r.identity(pod, c, s)
	assert.Nil(t, waiting)
	assert.Equal(t, []uint32{2000, 1000}, []uint32{uid, gid})
	assert.Equal(t, []uint32{5, 6}, groups, "fsGroup once")

	root := &v1.Container{Name: "root", Image: "img"}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptrTo(true)}
	_, _, _, waiting = r.identity(pod, root, effectiveSecurity(pod, root))
	require.NotNil(t, waiting)
	assert.Equal(t, reasonMessage{ReasonCreateContainerConfigError, `container has runAsNonRoot and image will run as root (pod: "p_ns(u)", container: root)`}, *waiting)

	r.imageUsers = ImageUsersFunc(func(image string) (ImageUser, bool) { return ImageUser{UID: 101, GID: 101}, image == "nginx" })
	root.Image = "nginx"
	uid, gid, _, waiting = r.identity(pod, root, effectiveSecurity(pod, root))
	assert.Nil(t, waiting, "the image's user is not root")
	assert.Equal(t, []uint32{101, 101}, []uint32{uid, gid})
	r.imageUsers = ImageUsersFunc(func(string) (ImageUser, bool) { return ImageUser{Name: "nginx"}, true })
	_, _, _, waiting = r.identity(pod, root, effectiveSecurity(pod, root))
	require.NotNil(t, waiting)
	assert.Contains(t, waiting.Message, "image has non-numeric user (nginx), cannot verify user is non-root")
	root.SecurityContext = &v1.SecurityContext{RunAsUser: ptrTo[int64](0)}
	_, _, _, waiting = r.identity(pod, root, effectiveSecurity(pod, root))
	require.NotNil(t, waiting)
	assert.Contains(t, waiting.Message, "container's runAsUser breaks non-root policy")

	priv := &v1.Container{SecurityContext: &v1.SecurityContext{Privileged: ptrTo(true)}}
	assert.Equal(t, sandbox.AllCapabilities, effectiveSecurity(&v1.Pod{}, priv).capabilities())
	assert.Equal(t, sandbox.DefaultCapabilities, effectiveSecurity(&v1.Pod{}, &v1.Container{}).capabilities())
}

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"POD": "web-0", "NS": "prod"}
	for in, want := range map[string]string{
		"$(POD)/logs":     "web-0/logs",
		"$(NS)-$(POD)":    "prod-web-0",
		"$$(POD)":         "$(POD)",
		"$(MISSING)/x":    "$(MISSING)/x",
		"$(POD":           "$(POD",
		"cost: $5":        "cost: $5",
		"trailing $":      "trailing $",
		"":                "",
		"$(POD)$(POD)$$$": "web-0web-0$$",
	} {
		assert.Equal(t, want, expandVars(in, vars), in)
	}
}

func ptrTo[T any](v T) *T { return &v }
