package processruntime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/admission"
)

// What the runtime refuses at admission, with which reason: never a field
// silently ignored.
func TestValidatePodRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{AllowHostAccess: true})
	off := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff})
	sc := func(p *v1.Pod) *v1.SecurityContext {
		if p.Spec.Containers[0].SecurityContext == nil {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{}
		}
		return p.Spec.Containers[0].SecurityContext
	}
	psc := func(p *v1.Pod) *v1.PodSecurityContext {
		if p.Spec.SecurityContext == nil {
			p.Spec.SecurityContext = &v1.PodSecurityContext{}
		}
		return p.Spec.SecurityContext
	}
	cases := []struct {
		name   string
		rt     *processruntime.Runtime
		mutate func(*v1.Pod)
		reason string
		want   string
	}{
		{"an unsafe sysctl", rt, func(p *v1.Pod) { psc(p).Sysctls = []v1.Sysctl{{Name: "kernel.panic", Value: "1"}} }, processruntime.ReasonSysctlForbidden, `"kernel.panic" is not namespaced`},
		{"a net sysctl in the host's network", rt, func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			psc(p).Sysctls = []v1.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: "1024 2048"}}
		}, processruntime.ReasonSysctlForbidden, "or its namespace is the host's"},
		{"a Localhost seccomp profile", rt, func(p *v1.Pod) {
			sc(p).SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("x.json")}
		}, processruntime.ReasonUnsupportedPod, `seccomp profile "Localhost" is not supported`},
		{"a Localhost AppArmor profile", rt, func(p *v1.Pod) {
			psc(p).AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("x")}
		}, processruntime.ReasonUnsupportedPod, "Localhost AppArmor profiles are not supported"},
		{"seLinuxOptions", rt, func(p *v1.Pod) { sc(p).SELinuxOptions = &v1.SELinuxOptions{Level: "s0"} }, processruntime.ReasonUnsupportedPod, "seLinuxOptions"},
		{"a hostPort", rt, func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}} }, processruntime.ReasonUnsupportedPod, "hostPort 8080 is not supported"},
		{"a user outside the pod's IDs", rt, func(p *v1.Pod) { sc(p).RunAsUser = ptr[int64](70000) }, processruntime.ReasonUnsupportedPod, "user or group ID 70000 is outside the pod's user namespace"},
		{"an fsGroup outside the pod's IDs", rt, func(p *v1.Pod) { psc(p).FSGroup = ptr[int64](65536) }, processruntime.ReasonUnsupportedPod, "65536 is outside"},
		{"an unknown capability", rt, func(p *v1.Pod) { sc(p).Capabilities = &v1.Capabilities{Add: []v1.Capability{"CAP_FLY"}} }, processruntime.ReasonUnsupportedPod, `unknown capability "CAP_FLY"`},
		{"runAsUser without a sandbox", off, func(p *v1.Pod) { sc(p).RunAsUser = ptr[int64](1000) }, processruntime.ReasonSandboxUnavailable, `runAsUser (container "c"), which needs the runtime's sandbox; this node runs pods without one (sandboxes are turned off)`},
		{"readOnlyRootFilesystem without a sandbox", off, func(p *v1.Pod) { sc(p).ReadOnlyRootFilesystem = ptr(true) }, processruntime.ReasonSandboxUnavailable, "readOnlyRootFilesystem"},
		{"RuntimeDefault without a sandbox", off, func(p *v1.Pod) {
			psc(p).SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}
		}, processruntime.ReasonSandboxUnavailable, "a seccomp profile"},
		{"privileged without AllowHostAccess, even without a sandbox", off, func(p *v1.Pod) { sc(p).Privileged = ptr(true) }, processruntime.ReasonHostAccessNotAllowed, `privileged container "c"`},
		{"mountPropagation", rt, func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			bi := v1.MountPropagationBidirectional
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v", MountPropagation: &bi}}
		}, processruntime.ReasonUnsupportedPod, "mountPropagation Bidirectional is not supported"},
		{"a mount of no volume", rt, func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "nope", MountPath: "/v"}} }, processruntime.ReasonUnsupportedPod, `volumeMount "nope" names no volume`},
		{"a plain pod", off, func(*v1.Pod) {}, "", ""},
		{"a restricted pod", rt, func(p *v1.Pod) {
			psc(p).RunAsNonRoot, psc(p).RunAsUser = ptr(true), ptr[int64](1000)
			psc(p).SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}
			sc(p).AllowPrivilegeEscalation = ptr(false)
			sc(p).Capabilities = &v1.Capabilities{Drop: []v1.Capability{"ALL"}}
		}, "", ""},
		{"privileged with AllowHostAccess", rt, func(p *v1.Pod) { sc(p).Privileged = ptr(true); p.Spec.HostNetwork = true }, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod(v1.RestartPolicyNever, "c", "true")
			tc.mutate(pod)
			if tc.rt == rt && !rt.Containment().Sandbox && tc.reason == "" {
				t.Skip("no sandbox here: " + rt.Containment().SandboxFallback)
			}
			err := tc.rt.ValidatePod(pod)
			res := tc.rt.Admit(context.Background(), &admission.Attributes{Pod: pod, Operation: admission.AddOperation})
			if tc.reason == "" {
				require.NoError(t, err)
				assert.True(t, res.Admit)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, processruntime.ErrUnsupported)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.reason, processruntime.RefusalReason(err))
			assert.Equal(t, admission.Result{Reason: tc.reason, Message: err.Error()}, res)
		})
	}
}
