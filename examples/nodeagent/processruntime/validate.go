package processruntime

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ErrUnsupported is wrapped by the errors of ValidatePod (and so of SyncPod)
// for pods that ask for something the process runtime cannot do.
var ErrUnsupported = errors.New("processruntime: unsupported pod")

// ValidatePod reports whether the runtime can run pod: it needs a UID that
// can name a directory, at least one container, unique container names,
// no envFrom, and env values that are literal
// or refer to metadata.name, metadata.namespace, metadata.uid,
// spec.nodeName or spec.serviceAccountName. The error says what is wrong
// and wraps ErrUnsupported. These are the checks of any process runtime;
// Runtime.ValidatePod adds those of the pod's securityContext against a
// runtime's sandbox and options, and is what an agent's admission (the
// Runtime's Admit) and SyncPod check. A container's command is not
// checked here: one that cannot be resolved (no command, and an image the
// runtime has no configuration for) waits in CreateContainerConfigError,
// as on a kubelet, rather than failing its pod.
func ValidatePod(pod *v1.Pod) error { return validatePod(pod, false) }

// validatePod is ValidatePod; envBuilt leaves env and envFrom to the
// per-pod features' environment builder, which builds every kind.
func validatePod(pod *v1.Pod, envBuilt bool) error {
	if pod == nil {
		return fmt.Errorf("%w: nil pod", ErrUnsupported)
	}
	if err := validUID(pod.UID); err != nil {
		return fmt.Errorf("%w: pod %s: %v", ErrUnsupported, podName(pod), err)
	}
	if len(pod.Spec.Containers) == 0 {
		return fmt.Errorf("%w: pod %s has no containers", ErrUnsupported, podName(pod))
	}
	seen := map[string]bool{}
	check := func(c *v1.Container) error {
		if c.Name == "" {
			return errors.New("a container has no name")
		}
		if !safeName(c.Name) {
			return fmt.Errorf("container name %q cannot name a file", c.Name)
		}
		if seen[c.Name] {
			return fmt.Errorf("two containers are named %q", c.Name)
		}
		seen[c.Name] = true
		if len(c.EnvFrom) > 0 && !envBuilt {
			return fmt.Errorf("container %q uses envFrom, which the process runtime does not support", c.Name)
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil || envBuilt {
				continue
			}
			if e.ValueFrom.FieldRef == nil {
				return fmt.Errorf("container %q: env %s takes its value from a source other than a pod field", c.Name, e.Name)
			}
			if _, ok := fieldRefValue(pod, e.ValueFrom.FieldRef.FieldPath); !ok {
				return fmt.Errorf("container %q: env %s refers to field %q, which the process runtime does not provide", c.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		return nil
	}
	for i := range pod.Spec.InitContainers {
		if err := check(&pod.Spec.InitContainers[i]); err != nil {
			return fmt.Errorf("%w: pod %s: %v", ErrUnsupported, podName(pod), err)
		}
	}
	for i := range pod.Spec.Containers {
		if err := check(&pod.Spec.Containers[i]); err != nil {
			return fmt.Errorf("%w: pod %s: %v", ErrUnsupported, podName(pod), err)
		}
	}
	return nil
}

// fieldRefValue resolves the pod fields the runtime provides to env vars.
func fieldRefValue(pod *v1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	}
	return "", false
}
