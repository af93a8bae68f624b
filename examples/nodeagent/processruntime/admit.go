package processruntime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
	"github.com/podkit/podkit/lifecycle/admission"
)

// The admission reasons of the pods the runtime refuses (Refusal.Reason),
// the kubelet's where it has one.
const (
	// ReasonUnsupportedPod: the pod asks for something the process runtime
	// cannot do (ValidatePod says what).
	ReasonUnsupportedPod = "UnsupportedPod"
	// ReasonHostAccessNotAllowed: the pod asks for what reaches the host
	// (privileged, hostNetwork, hostPID, hostIPC, hostUsers, hostPath
	// volumes) and the runtime was opened without Options.AllowHostAccess.
	ReasonHostAccessNotAllowed = "HostAccessNotAllowed"
	// ReasonSysctlForbidden: a sysctl that is not namespaced, or whose
	// namespace the pod shares with the host, as the kubelet's sysctl
	// admission names it.
	ReasonSysctlForbidden = "SysctlForbidden"
	// ReasonSandboxUnavailable: the pod's securityContext needs the
	// runtime's sandbox (its own user and mount namespaces), which this
	// runtime runs without (Containment says why).
	ReasonSandboxUnavailable = "SandboxUnavailable"
)

// Refusal is the error of a pod the runtime will not run, from
// Runtime.ValidatePod: Reason is its admission reason, Message says why.
// It wraps ErrUnsupported.
type Refusal struct {
	Reason, Message string
}

// Error returns "processruntime: " and the message.
func (e *Refusal) Error() string { return "processruntime: " + e.Message }

// Unwrap returns ErrUnsupported.
func (e *Refusal) Unwrap() error { return ErrUnsupported }

// RefusalReason returns the admission reason of an error of ValidatePod
// or Runtime.ValidatePod: the Refusal's, else ReasonUnsupportedPod.
func RefusalReason(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ReasonUnsupportedPod
}

// Admit is the runtime's admission handler (an admission.Handler): it
// rejects the pods Runtime.ValidatePod refuses, with the Refusal's reason,
// so they fail at once with it in their status instead of being retried.
// An agent lists it among its admission handlers.
func (r *Runtime) Admit(_ context.Context, attrs *admission.Attributes) admission.Result {
	if err := r.ValidatePod(attrs.Pod); err != nil {
		return admission.Result{Reason: RefusalReason(err), Message: err.Error()}
	}
	return admission.Result{Admit: true}
}

var _ admission.Handler = (*Runtime)(nil)

// ValidatePod reports whether this runtime runs pod: ValidatePod's checks,
// then its securityContext against the runtime's sandbox and options. A
// pod is refused (a *Refusal) when it asks for:
//
//   - what reaches the host: a privileged container, hostNetwork, hostPID,
//     hostIPC, hostUsers: true, a hostPath volume, unless the runtime was
//     opened with AllowHostAccess (ReasonHostAccessNotAllowed);
//   - a sysctl that is not namespaced, or in a namespace the pod shares
//     with the host (ReasonSysctlForbidden);
//   - what the runtime cannot do: a Localhost seccomp or AppArmor
//     profile, seLinuxOptions, windowsOptions, setHostnameAsFQDN,
//     volumeDevices, a volumeMount of no volume or with mountPropagation
//     other than None, a hostPort without
//     hostNetwork (the pod's network namespace has no port forwarding), an
//     unknown capability, a user or group ID outside the pod's user
//     namespace (0-65535), the RuntimeDefault seccomp filter on an
//     architecture it is not written for (ReasonUnsupportedPod);
//   - without a sandbox (Containment().Sandbox false), what needs one:
//     runAsUser, runAsGroup, supplementalGroups, fsGroup,
//     readOnlyRootFilesystem, capabilities, allowPrivilegeEscalation:
//     false, a seccomp profile, procMount, sysctls
//     (ReasonSandboxUnavailable).
//
// With the per-pod features (UsePodFeatures), every kind of env and
// envFrom is built, and a pod is refused for probes that cannot run, for
// volumes the volume manager does not prepare (volume.ReasonUnsupportedVolume),
// and for network probes and httpGet hooks of a pod the agent cannot
// reach (a sandbox with no pod network); without them, for probes,
// lifecycle hooks and activeDeadlineSeconds, which nothing would honour.
//
// runAsNonRoot is not checked here: a container that would run as root
// waits in CreateContainerConfigError, as on a kubelet (its image's user
// may change). SyncPod checks the same; an agent calls it (or lists Admit)
// in admission. Safe for concurrent use.
func (r *Runtime) ValidatePod(pod *v1.Pod) error {
	if err := validatePod(pod, r.podFeatures() != nil); err != nil {
		return err
	}
	refuse := func(reason, format string, args ...any) error {
		return &Refusal{Reason: reason, Message: fmt.Sprintf("pod %s: ", podName(pod)) + fmt.Sprintf(format, args...)}
	}
	if host := hostAccess(pod); len(host) > 0 && !r.allowHostAccess {
		return refuse(ReasonHostAccessNotAllowed, "asks for host access (%s), which this node does not allow", strings.Join(host, ", "))
	}
	spec := &pod.Spec
	if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
		return refuse(ReasonUnsupportedPod, "setHostnameAsFQDN is not supported by the process runtime (it knows no cluster domain)")
	}
	var sysctls []v1.Sysctl
	if spec.SecurityContext != nil {
		sc := spec.SecurityContext
		sysctls = sc.Sysctls
		if sc.SELinuxOptions != nil || sc.WindowsOptions != nil {
			return refuse(ReasonUnsupportedPod, "seLinuxOptions and windowsOptions are not supported by the process runtime")
		}
		if err := checkProfiles(sc.SeccompProfile, sc.AppArmorProfile); err != "" {
			return refuse(ReasonUnsupportedPod, "%s", err)
		}
		for _, id := range append([]*int64{sc.RunAsUser, sc.RunAsGroup, sc.FSGroup}, ptrs(sc.SupplementalGroups)...) {
			if id != nil && (*id < 0 || *id >= sandbox.IDsPerPod) {
				return refuse(ReasonUnsupportedPod, "user or group ID %d is outside the pod's user namespace (0-%d)", *id, sandbox.IDsPerPod-1)
			}
		}
	}
	for _, s := range sysctls {
		if !sandbox.NamespacedSysctl(s.Name) || (strings.HasPrefix(s.Name, "net.") && spec.HostNetwork) || (!strings.HasPrefix(s.Name, "net.") && spec.HostIPC) {
			return refuse(ReasonSysctlForbidden, "forbidden sysctl: %q is not namespaced, or its namespace is the host's", s.Name)
		}
	}
	for _, c := range allContainers(pod) {
		if msg := checkContainerSecurity(spec, c); msg != "" {
			return refuse(ReasonUnsupportedPod, "container %q: %s", c.Name, msg)
		}
	}
	if r.sandboxes == nil {
		if need := needsSandbox(pod); len(need) > 0 {
			return refuse(ReasonSandboxUnavailable, "asks for %s, which needs the runtime's sandbox; this node runs pods without one (%s)", strings.Join(need, ", "), r.noSandboxReason)
		}
	}
	return r.validateFeatures(pod, refuse)
}

func ptrs(v []int64) []*int64 {
	out := make([]*int64, len(v))
	for i := range v {
		out[i] = &v[i]
	}
	return out
}

// allContainers returns the pod's init and regular containers.
func allContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			out = append(out, &list[i])
		}
	}
	return out
}

// hostAccess lists what pod asks for that reaches the host.
func hostAccess(pod *v1.Pod) []string {
	var out []string
	spec := &pod.Spec
	for _, h := range []struct {
		on   bool
		name string
	}{{spec.HostNetwork, "hostNetwork"}, {spec.HostPID, "hostPID"}, {spec.HostIPC, "hostIPC"}, {spec.HostUsers != nil && *spec.HostUsers, "hostUsers"}} {
		if h.on {
			out = append(out, h.name)
		}
	}
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			out = append(out, fmt.Sprintf("privileged container %q", c.Name))
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			out = append(out, fmt.Sprintf("hostPath volume %q", v.Name))
		}
	}
	return out
}

// checkProfiles says what is wrong with a seccomp or AppArmor profile.
func checkProfiles(seccomp *v1.SeccompProfile, apparmor *v1.AppArmorProfile) string {
	if seccomp != nil {
		switch seccomp.Type {
		case v1.SeccompProfileTypeUnconfined:
		case v1.SeccompProfileTypeRuntimeDefault:
			if !sandbox.SeccompSupported() {
				return "the RuntimeDefault seccomp filter is not written for this node's architecture"
			}
		default:
			return fmt.Sprintf("seccomp profile %q is not supported by the process runtime (Unconfined and RuntimeDefault are)", seccomp.Type)
		}
	}
	if apparmor != nil && apparmor.Type == v1.AppArmorProfileTypeLocalhost {
		return "Localhost AppArmor profiles are not supported by the process runtime (it applies no AppArmor profile)"
	}
	return ""
}

// checkContainerSecurity says what in a container's securityContext (or
// ports) the runtime cannot do.
func checkContainerSecurity(spec *v1.PodSpec, c *v1.Container) string {
	if len(c.VolumeDevices) > 0 {
		return "volumeDevices (raw block devices) are not supported by the process runtime"
	}
	for _, m := range c.VolumeMounts {
		found := false
		for _, v := range spec.Volumes {
			found = found || v.Name == m.Name
		}
		switch {
		case !found:
			return fmt.Sprintf("volumeMount %q names no volume of the pod", m.Name)
		case !filepath.IsAbs(m.MountPath) || filepath.Clean(m.MountPath) == "/":
			return fmt.Sprintf("volumeMount %q: mountPath %q must be an absolute path below /", m.Name, m.MountPath)
		case m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone:
			return fmt.Sprintf("volumeMount %q: mountPropagation %s is not supported by the process runtime (a pod's mounts are private to it)", m.Name, *m.MountPropagation)
		}
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 && !spec.HostNetwork {
			return fmt.Sprintf("hostPort %d is not supported by the process runtime (the pod's network has no port forwarding)", p.HostPort)
		}
	}
	sc := c.SecurityContext
	if sc == nil {
		return ""
	}
	if sc.SELinuxOptions != nil || sc.WindowsOptions != nil {
		return "seLinuxOptions and windowsOptions are not supported by the process runtime"
	}
	if msg := checkProfiles(sc.SeccompProfile, sc.AppArmorProfile); msg != "" {
		return msg
	}
	for _, id := range []*int64{sc.RunAsUser, sc.RunAsGroup} {
		if id != nil && (*id < 0 || *id >= sandbox.IDsPerPod) {
			return fmt.Sprintf("user or group ID %d is outside the pod's user namespace (0-%d)", *id, sandbox.IDsPerPod-1)
		}
	}
	if sc.Capabilities != nil {
		for _, cp := range append(append([]v1.Capability(nil), sc.Capabilities.Add...), sc.Capabilities.Drop...) {
			if _, err := sandbox.Capability(string(cp)); err != nil && !isAll(cp) {
				return fmt.Sprintf("unknown capability %q", cp)
			}
		}
	}
	return ""
}

// needsSandbox lists what pod asks for that only the sandbox gives.
func needsSandbox(pod *v1.Pod) []string {
	var out []string
	if sc := pod.Spec.SecurityContext; sc != nil {
		add := func(set bool, what string) {
			if set {
				out = append(out, what)
			}
		}
		add(sc.RunAsUser != nil, "runAsUser")
		add(sc.RunAsGroup != nil, "runAsGroup")
		add(len(sc.SupplementalGroups) > 0, "supplementalGroups")
		add(sc.FSGroup != nil, "fsGroup")
		add(sc.SeccompProfile != nil && sc.SeccompProfile.Type != v1.SeccompProfileTypeUnconfined, "a seccomp profile")
		add(len(sc.Sysctls) > 0, "sysctls")
	}
	for _, c := range allContainers(pod) {
		sc := c.SecurityContext
		if sc == nil {
			continue
		}
		add := func(set bool, what string) {
			if set {
				out = append(out, fmt.Sprintf("%s (container %q)", what, c.Name))
			}
		}
		add(sc.RunAsUser != nil, "runAsUser")
		add(sc.RunAsGroup != nil, "runAsGroup")
		add(sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "readOnlyRootFilesystem")
		add(sc.Capabilities != nil && (len(sc.Capabilities.Add) > 0 || len(sc.Capabilities.Drop) > 0), "capabilities")
		add(sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "allowPrivilegeEscalation: false")
		add(sc.SeccompProfile != nil && sc.SeccompProfile.Type != v1.SeccompProfileTypeUnconfined, "a seccomp profile")
		add(sc.ProcMount != nil && *sc.ProcMount != v1.DefaultProcMount, "procMount")
	}
	return out
}
