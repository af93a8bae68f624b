package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// PublishKubeletEndpoint tells the API server where the node serves the
// kubelet API: it sets the Node's status.addresses to an InternalIP of ip
// plus a Hostname of the node's name, and status.daemonEndpoints'
// kubeletEndpoint to port. The API server reaches the node there for
// pods/log (kubectl logs) and the nodes/proxy subresource, preferring the
// address types its --kubelet-preferred-address-types lists (the default
// puts Hostname first: a cluster whose node names do not resolve needs
// InternalIP first).
//
// It replaces the addresses a previous run published, so a restarted agent
// on a new port or address is found. A node identity may patch its own
// Node's status. Errors come from the API server, or name a bad argument.
func PublishKubeletEndpoint(ctx context.Context, nodes corev1client.NodesGetter, nodeName string, ip net.IP, port int) error {
	switch {
	case nodeName == "":
		return errors.New("nodestatus: PublishKubeletEndpoint: no node name")
	case ip == nil:
		return errors.New("nodestatus: PublishKubeletEndpoint: no IP address")
	case port <= 0 || port > 65535:
		return fmt.Errorf("nodestatus: PublishKubeletEndpoint: port %d is out of range", port)
	}
	// A JSON merge patch replaces the address list as a whole; the
	// strategic one would merge it by type and keep stale entries.
	patch, err := json.Marshal(map[string]any{
		"status": map[string]any{
			"addresses": []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: ip.String()},
				{Type: v1.NodeHostName, Address: nodeName},
			},
			"daemonEndpoints": v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: int32(port)}},
		},
	})
	if err != nil {
		return err
	}
	if _, err := nodes.Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("nodestatus: publishing the kubelet endpoint of node %q: %w", nodeName, err)
	}
	return nil
}

// DeclareFeatures sets the Node's status.declaredFeatures to features,
// as a kubelet declares what it supports: the API server then relies on
// them (ExtendWebSocketsToKubelet: it passes kubectl's WebSocket streams
// through to the node instead of translating them to SPDY). It replaces
// what a previous run declared. An API server without the
// NodeDeclaredFeatures gate drops the field, which changes nothing. A
// node identity may patch its own Node's status; errors come from the API
// server, or name a bad argument.
func DeclareFeatures(ctx context.Context, nodes corev1client.NodesGetter, nodeName string, features []string) error {
	if nodeName == "" {
		return errors.New("nodestatus: DeclareFeatures: no node name")
	}
	if features == nil {
		features = []string{}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"declaredFeatures": features}})
	if err != nil {
		return err
	}
	if _, err := nodes.Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("nodestatus: declaring the features of node %q: %w", nodeName, err)
	}
	return nil
}

// HostIP returns the first global unicast IPv4 address of a network
// interface that is up, or 127.0.0.1 when there is none: a default for the
// address an agent publishes (PublishKubeletEndpoint).
func HostIP() net.IP {
	ifaces, err := net.Interfaces()
	if err == nil {
		for _, iface := range ifaces {
			if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, err := iface.Addrs()
			if err != nil {
				continue
			}
			for _, a := range addrs {
				if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.To4() != nil && ipnet.IP.IsGlobalUnicast() {
					return ipnet.IP.To4()
				}
			}
		}
	}
	return net.IPv4(127, 0, 0, 1)
}
