package volume_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/lifecycle/volume"
)

func emptyDir(name string, src v1.EmptyDirVolumeSource) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &src}}
}

func TestEmptyDirOnDisk(t *testing.T) {
	e := newEnv(t, volume.Options{})
	p := pod("p1", emptyDir("scratch", v1.EmptyDirVolumeSource{}), emptyDir("private", v1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o1750)}))
	setUp(t, e, p)
	dir, err := e.m.HostPath("p1", "scratch")
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o777), mode(t, dir), "anyone may write, as on a kubelet")
	private, _ := e.m.HostPath("p1", "private")
	require.Equal(t, 0o750|os.ModeSticky, mode(t, private), "the alpha mode field is honoured")
	_, mounted := e.tmpfs.size(dir)
	require.False(t, mounted)

	// What a container writes survives the next syncs; so does a mode it set.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "work"), []byte("data"), 0o600))
	require.NoError(t, os.Chmod(dir, 0o700))
	setUp(t, e, p)
	require.Equal(t, []string{"work=data"}, tree(t, dir))
	require.Equal(t, os.FileMode(0o700), mode(t, dir))
}

func TestEmptyDirWithFSGroup(t *testing.T) {
	e := newEnv(t, volume.Options{})
	p := pod("p1", emptyDir("scratch", v1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o700)}))
	p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	setUp(t, e, p)
	dir, _ := e.m.HostPath("p1", "scratch")
	require.Equal(t, 0o770|os.ModeSetgid, mode(t, dir), "the fsGroup's permissions override the mode, as the API documents")
}

func TestEmptyDirInMemory(t *testing.T) {
	allocatable := func() v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")} }
	limits := func(mem string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)}}
	}
	for _, tc := range []struct {
		name        string
		sizeLimit   string
		containers  []v1.ResourceRequirements
		podLimit    string
		allocatable func() v1.ResourceList
		want        int64
	}{
		{"node's allocatable", "", []v1.ResourceRequirements{{}}, "", allocatable, 8 << 30},
		{"pod's limit", "", []v1.ResourceRequirements{limits("1Gi"), limits("1Gi")}, "", allocatable, 2 << 30},
		{"one container without limit: node's", "", []v1.ResourceRequirements{limits("1Gi"), {}}, "", allocatable, 8 << 30},
		{"pod-level limit", "", []v1.ResourceRequirements{{}}, "3Gi", allocatable, 3 << 30},
		{"sizeLimit below", "64Mi", []v1.ResourceRequirements{limits("1Gi")}, "", allocatable, 64 << 20},
		{"sizeLimit above the pod's", "4Gi", []v1.ResourceRequirements{limits("1Gi")}, "", allocatable, 1 << 30},
		{"nothing known: the system's default", "", []v1.ResourceRequirements{{}}, "", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, volume.Options{NodeAllocatable: tc.allocatable})
			src := v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}
			if tc.sizeLimit != "" {
				src.SizeLimit = ptr.To(resource.MustParse(tc.sizeLimit))
			}
			p := pod("p1", emptyDir("mem", src))
			p.Spec.Containers = nil
			for i, r := range tc.containers {
				p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
			}
			if tc.podLimit != "" {
				p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(tc.podLimit)}}
			}
			setUp(t, e, p)
			dir, _ := e.m.HostPath("p1", "mem")
			size, mounted := e.tmpfs.size(dir)
			require.True(t, mounted)
			require.Equal(t, tc.want, size)
			require.Equal(t, os.FileMode(0o777), mode(t, dir))
			setUp(t, e, p)
			require.Equal(t, 1, e.tmpfs.mounts, "mounted once")
		})
	}
}

func TestUnsupported(t *testing.T) {
	require.NoError(t, volume.Unsupported(nil))
	supported := pod("p1",
		configMapVolume("a", "x"), secretVolume("b", "y"), emptyDir("c", v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}),
		v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
		v1.Volume{Name: "e", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}}, {ConfigMap: &v1.ConfigMapProjection{}}}}}},
	)
	require.NoError(t, volume.Unsupported(supported))

	p := pod("p1",
		configMapVolume("fine", "x"),
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log"}}},
		v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
		v1.Volume{Name: "huge", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}},
		v1.Volume{Name: "ctb", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{}}, {ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "ca"}}}}}},
		v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}},
		v1.Volume{Name: "iscsi", VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{}}},
		v1.Volume{Name: "nothing"},
	)
	err := volume.Unsupported(p)
	var ue *volume.UnsupportedError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, []volume.UnsupportedVolume{
		{Name: "host", Type: "hostPath", Reason: "hostPath volumes reach the host: the runtime mounts them or refuses the pod"},
		{Name: "data", Type: "persistentVolumeClaim", Reason: "this node attaches no persistent volumes"},
		{Name: "huge", Type: "emptyDir", Reason: `medium "HugePages" is not supported: only the node's disk ("") and memory ("Memory")`},
		{Name: "ctb", Type: "projected", Reason: "source 1 is a clusterTrustBundle: this node has no source of trust bundles"},
		{Name: "nfs", Type: "nfs", Reason: "this node mounts no network file systems"},
		{Name: "iscsi", Type: "iscsi", Reason: "this node does not prepare volumes of this type"},
		{Name: "nothing", Type: "none", Reason: "the volume names no source"},
	}, ue.Volumes)
	require.Contains(t, err.Error(), `volume: unsupported volumes: volume "host" (hostPath): hostPath volumes reach the host`)
	rest := ue.Without(volume.TypeHostPath)
	require.ErrorAs(t, rest, &ue)
	require.Len(t, ue.Volumes, 6)
	only := pod("p2", v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}})
	require.ErrorAs(t, volume.Unsupported(only), &ue)
	require.NoError(t, ue.Without(volume.TypeHostPath))
}
