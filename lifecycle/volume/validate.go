package volume

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// validatePod checks what SetUp needs of a pod.
func validatePod(pod *v1.Pod) error {
	if pod == nil {
		return errors.New("volume: SetUp needs a pod")
	}
	if err := validateUID(pod.UID); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range pod.Spec.Volumes {
		name := pod.Spec.Volumes[i].Name
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("volume: pod %s: invalid volume name %q: %s", podName(pod), name, strings.Join(errs, "; "))
		}
		if seen[name] {
			return fmt.Errorf("volume: pod %s: two volumes are named %q", podName(pod), name)
		}
		seen[name] = true
	}
	return nil
}

// validateUID checks that uid can name a directory of the root.
func validateUID(uid types.UID) error {
	s := string(uid)
	if s == "" || s == "." || s == ".." || strings.HasPrefix(s, ".") || strings.ContainsAny(s, "/\\\x00") || len(s) > maxFileNameLength {
		return fmt.Errorf("volume: invalid pod UID %q", s)
	}
	return nil
}

// podName names a pod in messages and logs: namespace/name.
func podName(pod *v1.Pod) string {
	if pod == nil {
		return ""
	}
	return pod.Namespace + "/" + pod.Name
}
