package processruntime_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/volume"
)

// Every volume type the volume manager prepares is visible inside the
// container at its mountPath, as on a kubelet: a configMap (with items),
// a secret, a downwardAPI volume, a projected volume with a
// service-account token, an emptyDir shared by two containers and one in
// memory; a subPath mount of one key; configMap, secret, downwardAPI and
// projected volumes, and readOnly mounts, are read-only.
func TestVolumesAreMountedAtTheirMountPath(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	e.objects.setConfigMap("test", "web", map[string]string{"index.html": "<h1>hi</h1>", "nginx.conf": "worker_processes 1;"})
	e.objects.setSecret("test", "tls", map[string]string{"tls.key": "KEY"})
	pod := featurePod(
		"writer", `echo shared > /cache/from-writer; exec sleep 600`,
		"reader", `exec sleep 600`,
	)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "web", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "web"}}}},
		{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "web"}, Items: []v1.KeyToPath{{Key: "nginx.conf", Path: "etc/nginx.conf"}}}}},
		{Name: "tls", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "tls"}}},
		{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
		{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(3600))}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "web"}, Items: []v1.KeyToPath{{Key: "index.html", Path: "index.html"}}}},
		}}}},
		{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: new(resource.MustParse("8Mi"))}}},
	}
	writer, reader := &pod.Spec.Containers[0], &pod.Spec.Containers[1]
	writer.VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	reader.VolumeMounts = []v1.VolumeMount{
		{Name: "web", MountPath: "/usr/share/nginx/html"},
		{Name: "conf", MountPath: "/etc/nginx.conf", SubPath: "etc/nginx.conf"},
		{Name: "tls", MountPath: "/etc/tls"},
		{Name: "podinfo", MountPath: "/etc/podinfo"},
		{Name: "token", MountPath: "/var/run/secrets/tokens"},
		{Name: "cache", MountPath: "/cache", ReadOnly: true},
		{Name: "mem", MountPath: "/scratch-mem"},
	}
	e.run(pod)
	e.waitRunning(pod, "writer")
	e.waitRunning(pod, "reader")
	eventually(t, 30*time.Second, "the writer wrote into the shared emptyDir", func() bool {
		return e.execCode(pod, "reader", "test", "-f", "/cache/from-writer") == 0
	})
	for path, want := range map[string]string{
		"/usr/share/nginx/html/index.html":   "<h1>hi</h1>",
		"/usr/share/nginx/html/nginx.conf":   "worker_processes 1;",
		"/etc/nginx.conf":                    "worker_processes 1;",
		"/etc/tls/tls.key":                   "KEY",
		"/etc/podinfo/labels":                `app="features"`,
		"/etc/podinfo/name":                  pod.Name,
		"/var/run/secrets/tokens/token":      "token-of-test-default-for-" + pod.Name,
		"/var/run/secrets/tokens/index.html": "<h1>hi</h1>",
		"/cache/from-writer":                 "shared\n",
	} {
		assert.Equal(t, want, e.exec(pod, "reader", "cat", path), path)
	}
	for _, dir := range []string{"/usr/share/nginx/html", "/etc/tls", "/etc/podinfo", "/var/run/secrets/tokens", "/cache"} {
		assert.NotZero(t, e.execCode(pod, "reader", "touch", dir+"/new"), "%s is read-only", dir)
	}
	e.exec(pod, "reader", "sh", "-c", "echo in-memory > /scratch-mem/f")
	assert.Equal(t, "in-memory\n", e.exec(pod, "reader", "cat", "/scratch-mem/f"), "a memory emptyDir is writable")
	assert.Contains(t, e.exec(pod, "reader", "cat", "/proc/mounts"), "/scratch-mem", "it is a mount of its own")
	for _, ev := range e.rec.of(pod) {
		assert.NotContains(t, ev.message, "KEY", "no secret in an event")
		assert.NotEqual(t, processruntime.ReasonVolumeNotProvided, ev.reason)
	}
}

// A configMap volume follows its source: a change of the config map shows
// in the running container's files, without a restart.
func TestVolumeContentIsUpdated(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	e.objects.setConfigMap("test", "settings", map[string]string{"mode": "one"})
	pod := featurePod("c", `exec sleep 600`)
	pod.Spec.Volumes = []v1.Volume{{Name: "settings", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "settings", MountPath: "/etc/settings"}}
	e.run(pod)
	first := e.waitRunning(pod, "c")
	assert.Equal(t, "one", e.exec(pod, "c", "cat", "/etc/settings/mode"))

	e.objects.setConfigMap("test", "settings", map[string]string{"mode": "two", "extra": "x"})
	eventually(t, 30*time.Second, "the new content shows in the container", func() bool {
		return strings.TrimSpace(e.exec(pod, "c", "cat", "/etc/settings/mode")) == "two"
	})
	assert.Equal(t, "x", e.exec(pod, "c", "cat", "/etc/settings/extra"))
	c, _ := status(t, e.rt, pod.UID).Container("c")
	assert.Equal(t, first.ID, c.ID, "the same run of the container sees it")
}

// A volume the volume manager does not prepare is refused with its reason
// rather than mounted empty.
func TestUnsupportedVolumeIsRefused(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	pod := featurePod("c", `exec sleep 600`)
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	err := e.rt.ValidatePod(pod)
	assert.ErrorIs(t, err, processruntime.ErrUnsupported)
	assert.Equal(t, volume.ReasonUnsupportedVolume, processruntime.RefusalReason(err))
}
