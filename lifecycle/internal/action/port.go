package action

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ResolvePort returns the port number port names: a number as it is, or a
// name looked up in the container's ports, as the kubelet does. A name the
// container does not declare, or a number outside 1–65535, is an error.
func ResolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	n := -1
	switch port.Type {
	case intstr.Int:
		n = int(port.IntVal)
	case intstr.String:
		found := false
		if c != nil {
			for _, p := range c.Ports {
				if p.Name == port.StrVal {
					n, found = int(p.ContainerPort), true
					break
				}
			}
		}
		if !found {
			return 0, fmt.Errorf("port %q not found", port.StrVal)
		}
	default:
		return 0, fmt.Errorf("port %+v is neither a number nor a name", port)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", n)
	}
	return n, nil
}
