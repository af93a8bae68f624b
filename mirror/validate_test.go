package mirror_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/mirror"
)

// validPod is a static pod that uses every field ValidatePodObject checks.
func validPod() *v1.Pod {
	grace, deadline := int64(0), int64(60)
	always := v1.ContainerRestartPolicyAlways
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "kube-system",
			Labels:      map[string]string{"app.kubernetes.io/name": "web"},
			Annotations: map[string]string{"example.com/owner": "team-a"},
		},
		Spec: v1.PodSpec{
			Volumes:        []v1.Volume{{Name: "data"}},
			InitContainers: []v1.Container{{Name: "log-shipper", Image: "shipper:1", RestartPolicy: &always}},
			Containers: []v1.Container{{
				Name:         "server",
				Image:        "web:1",
				Env:          []v1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "my.setting-2"}},
				Ports:        []v1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 80, Protocol: v1.ProtocolTCP}},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
				},
			}},
			RestartPolicy:                 v1.RestartPolicyOnFailure,
			DNSPolicy:                     v1.DNSDefault,
			TerminationGracePeriodSeconds: &grace,
			ActiveDeadlineSeconds:         &deadline,
			Hostname:                      "web-0",
		},
	}
}

func TestPrepareStaticPodAcceptsAValidPod(t *testing.T) {
	pod := validPod()
	require.NoError(t, mirror.PrepareStaticPod(pod, "node-a", mirror.FileSource))
	require.NoError(t, mirror.ValidatePodObject(pod))
}

// The invalid static pods a node agent was seen admitting, and the other
// fields the kubelet checks: each is refused, naming the field, and the
// pod is left as it was.
func TestPrepareStaticPodRefusesAnInvalidPod(t *testing.T) {
	neg := int64(-1)
	zero := int64(0)
	never := v1.ContainerRestartPolicy("Never")
	cases := []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{"slash in the name", func(p *v1.Pod) { p.Name = "a/b" }, `metadata.name: Invalid value: "a/b-node-a"`},
		{"dot-dot name", func(p *v1.Pod) { p.Name = ".." }, `metadata.name: Invalid value: "..-node-a"`},
		{"path as the namespace", func(p *v1.Pod) { p.Namespace = "../../tmp/x" }, `metadata.namespace: Invalid value: "../../tmp/x"`},
		{"long name", func(p *v1.Pod) { p.Name = strings.Repeat("a", 250) }, "metadata.name: Invalid value"},
		{"label key with a space", func(p *v1.Pod) { p.Labels = map[string]string{"a b": "x"} }, "metadata.labels: Invalid value: \"a b\""},
		{"oversized annotations", func(p *v1.Pod) { p.Annotations["big"] = strings.Repeat("x", 300<<10) }, "metadata.annotations: Too long"},
		{"300-character container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = strings.Repeat("c", 300) }, "spec.containers[0].name: Invalid value"},
		{"container name with a slash", func(p *v1.Pod) { p.Spec.Containers[0].Name = "../x" }, `spec.containers[0].name: Invalid value: "../x"`},
		{"duplicate container names", func(p *v1.Pod) { p.Spec.Containers[0].Name = "log-shipper" }, `spec.containers[0].name: Duplicate value: "log-shipper"`},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, "spec.containers: Required value"},
		{"no image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }, "spec.containers[0].image: Required value"},
		{"env name", func(p *v1.Pod) { p.Spec.Containers[0].Env[0].Name = "A=B" }, `spec.containers[0].env[0].name: Invalid value: "A=B"`},
		{"port", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 }, "spec.containers[0].ports[0].containerPort: Invalid value: 70000"},
		{"port protocol", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "ICMP" }, `spec.containers[0].ports[0].protocol: Unsupported value: "ICMP"`},
		{"mount of no volume", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "cache" }, `spec.containers[0].volumeMounts[0].name: Not found: "cache"`},
		{"duplicate volume", func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data"}) }, `spec.volumes[1].name: Duplicate value: "data"`},
		{"request above limit", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
		}, `spec.containers[0].resources.requests[cpu]: Invalid value: "2"`},
		{"negative request", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse("-1")
		}, `spec.containers[0].resources.requests[memory]: Invalid value: "-1"`},
		{"init container restart policy", func(p *v1.Pod) { p.Spec.InitContainers[0].RestartPolicy = &never }, `spec.initContainers[0].restartPolicy: Unsupported value: "Never"`},
		{"restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, `spec.restartPolicy: Unsupported value: "Sometimes"`},
		{"dns policy", func(p *v1.Pod) { p.Spec.DNSPolicy = "Public" }, `spec.dnsPolicy: Unsupported value: "Public"`},
		{"negative grace period", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = &neg }, "spec.terminationGracePeriodSeconds: Invalid value: -1"},
		{"zero deadline", func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = &zero }, "spec.activeDeadlineSeconds: Invalid value: 0"},
		{"hostname", func(p *v1.Pod) { p.Spec.Hostname = "Web_0" }, `spec.hostname: Invalid value: "Web_0"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := validPod()
			tc.mutate(pod)
			before := pod.DeepCopy()
			err := mirror.PrepareStaticPod(pod, "node-a", mirror.FileSource)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "mirror: static pod "), err.Error())
			assert.Equal(t, before, pod, "the pod is left unchanged")
		})
	}
}

func TestValidatePodObjectListsEveryProblem(t *testing.T) {
	pod := validPod()
	pod.Name = "Bad_Name"
	pod.Spec.Containers[0].Image = ""
	err := mirror.ValidatePodObject(pod)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metadata.name")
	assert.Contains(t, err.Error(), "spec.containers[0].image")
	assert.EqualError(t, mirror.ValidatePodObject(nil), "mirror: ValidatePodObject: nil pod")
}
