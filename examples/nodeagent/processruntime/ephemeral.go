package processruntime

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// This file runs the pod's ephemeral containers (kubectl debug): SyncPod
// starts each once it appears in the pod's spec, whatever the pod's init
// containers are doing, as the kubelet does; never again after it exits,
// never probed, and never part of the pod's phase or readiness. It runs
// in the pod's sandbox as the other containers do, with its stdin and
// terminal held by its log shim so that kubectl debug -it attaches; with
// targetContainerName, in its target's view (its volumes, its read-only
// root: ProcessSpec.ViewOf), the pod's PID namespace being shared by all
// its containers already.

// ephemeralSpec returns the pod's ephemeral container name as a
// Container (the API's types have the same fields), and its target.
func ephemeralSpec(pod *v1.Pod, name string) (spec *v1.Container, target string) {
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if ec.Name == name {
			return (*v1.Container)(&ec.EphemeralContainerCommon), ec.TargetContainerName
		}
	}
	return nil, ""
}

// trackEphemeralLocked gives each ephemeral container of pod's spec its
// entry in p (a new one has never run). A name that cannot name a file,
// or that a regular container has, is left out (the API server refuses
// both); ephemeralStartsLocked never sees it.
func trackEphemeralLocked(p *podState, pod *v1.Pod) {
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		c := p.containers[ec.Name]
		switch {
		case c == nil && safeName(ec.Name):
			c = &container{rec: containerRecord{Name: ec.Name, Ephemeral: true}}
			p.containers[ec.Name] = c
		case c == nil || !c.rec.Ephemeral:
			continue
		}
		c.image = ec.Image
	}
}

// ephemeralStartsLocked lists the ephemeral containers SyncPod should
// start now: those that never ran, unless the pod is done (pl.terminal)
// or their target has not started yet (they start once it has; a target
// that ran and stopped makes their start fail, as on a kubelet).
func ephemeralStartsLocked(p *podState, pod *v1.Pod, pl plan) []*container {
	if pl.terminal {
		return nil
	}
	var out []*container
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		c := p.containers[ec.Name]
		if c == nil || !c.rec.Ephemeral || c.proc != nil || c.starting || c.rec.Exit != nil {
			continue
		}
		if t := ec.TargetContainerName; t != "" {
			if tc := p.containers[t]; tc != nil && tc.proc == nil && tc.rec.Exit == nil {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// ephemeralWaiting says why ephemeral container c of pod cannot be
// created (it waits in CreateContainerConfigError, with a ContainerFailed
// event, and is tried again at each SyncPod), or nil; nil too for a
// container that is not ephemeral. A pod cannot be refused for what an
// ephemeral container asks, as it runs already: what ValidatePod would
// refuse in a regular container makes the ephemeral one wait instead.
func (r *Runtime) ephemeralWaiting(pod *v1.Pod, c *container) *reasonMessage {
	if !c.rec.Ephemeral {
		return nil
	}
	spec, target := ephemeralSpec(pod, c.rec.Name)
	if spec == nil {
		return &reasonMessage{ReasonCreateContainerConfigError, "the ephemeral container is not in the pod's spec"}
	}
	why := r.ephemeralRefusal(pod, spec, target)
	if why == "" {
		return nil
	}
	return &reasonMessage{ReasonCreateContainerConfigError, why}
}

// ephemeralRefusal is what makes the ephemeral container spec, aimed at
// target, impossible to run here; "" when it can run.
func (r *Runtime) ephemeralRefusal(pod *v1.Pod, spec *v1.Container, target string) string {
	if len(spec.EnvFrom) > 0 {
		return "envFrom is not supported by the process runtime"
	}
	for _, e := range spec.Env {
		if e.ValueFrom != nil && (e.ValueFrom.FieldRef == nil || !validFieldRef(pod, e.ValueFrom.FieldRef.FieldPath)) {
			return fmt.Sprintf("env %s takes its value from a source the process runtime does not provide", e.Name)
		}
	}
	if msg := checkContainerSecurity(&pod.Spec, spec); msg != "" {
		return msg
	}
	sc := spec.SecurityContext
	privileged := sc != nil && sc.Privileged != nil && *sc.Privileged
	switch {
	case privileged && !r.allowHostAccess:
		return "a privileged container reaches the host, which this node does not allow"
	case privileged && r.sandboxes != nil && !noUserNamespace(pod):
		return "the pod runs in a user namespace of its own, where no container can be privileged"
	}
	if r.sandboxes == nil {
		probe := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*spec}}}
		if need := needsSandbox(probe); len(need) > 0 {
			return fmt.Sprintf("asks for %s, which needs the runtime's sandbox; this node runs pods without one (%s)", strings.Join(need, ", "), r.noSandboxReason)
		}
	}
	if target != "" {
		if findContainer(pod, target) == nil {
			return fmt.Sprintf("targetContainerName %q names no container of the pod", target)
		}
		if r.sandboxes != nil && (len(spec.VolumeMounts) > 0 || (sc != nil && (sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem || sc.ProcMount != nil && *sc.ProcMount != v1.DefaultProcMount))) {
			return fmt.Sprintf("the process runtime runs an ephemeral container in the view of its target %q, so it cannot have volumeMounts, readOnlyRootFilesystem or procMount of its own", target)
		}
	}
	return ""
}

// validFieldRef reports whether the runtime provides the pod field path.
func validFieldRef(pod *v1.Pod, path string) bool {
	_, ok := fieldRefValue(pod, path)
	return ok
}

// aimEphemeral points ps, the process of container name of pod, at the
// view of its target's running process when name is an ephemeral
// container with targetContainerName. The error says the target does not
// run (the start fails, as on a kubelet).
func (r *Runtime) aimEphemeral(p *podState, pod *v1.Pod, name string, ps *sandbox.ProcessSpec) error {
	spec, target := ephemeralSpec(pod, name)
	if spec == nil || target == "" {
		return nil
	}
	r.mu.Lock()
	var view string
	if tc := p.containers[target]; tc != nil && tc.proc != nil && tc.proc.sb != nil {
		view = tc.proc.name
	}
	r.mu.Unlock()
	if view == "" {
		return fmt.Errorf("the target container %q does not run", target)
	}
	if len(ps.Mounts) > 0 || ps.ReadOnlyRoot || ps.UnmaskedProc {
		return errors.New("an ephemeral container in its target's view cannot have a view of its own")
	}
	ps.ViewOf = view
	return nil
}

// apiEphemeralStatuses converts the statuses of the pod's ephemeral
// containers, in spec order, as the kubelet reports them: never ready,
// and no started flag (no probe looks at them).
func apiEphemeralStatuses(pod *v1.Pod, have []ContainerStatus, stopped bool) []v1.ContainerStatus {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	specs := make([]v1.Container, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		specs[i] = v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	out := apiContainerStatuses(pod, specs, have, stopped, false, false)
	for i := range out {
		out[i].Ready, out[i].Started = false, nil
	}
	return out
}
