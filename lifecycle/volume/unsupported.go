package volume

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ReasonUnsupportedVolume is a reason an agent's admission can give when
// it refuses a pod for a volume of a type this package does not prepare
// (with UnsupportedError's message).
const ReasonUnsupportedVolume = "UnsupportedVolume"

// UnsupportedVolume is one volume of a pod the manager does not prepare.
type UnsupportedVolume struct {
	// Name is the volume's name, Type its type as the API spells it
	// (hostPath, persistentVolumeClaim, ...), Reason why, for a person.
	Name, Type, Reason string
}

// UnsupportedError lists the volumes of a pod the manager does not
// prepare. It is what Unsupported returns.
type UnsupportedError struct {
	Volumes []UnsupportedVolume
}

func (e *UnsupportedError) Error() string {
	parts := make([]string, len(e.Volumes))
	for i, v := range e.Volumes {
		parts[i] = fmt.Sprintf("volume %q (%s): %s", v.Name, v.Type, v.Reason)
	}
	return "volume: unsupported volumes: " + strings.Join(parts, "; ")
}

// Without returns e without the volumes of type typ (for a runtime that
// handles those itself, hostPath for instance), or nil when none is left.
func (e *UnsupportedError) Without(typ string) error {
	var rest []UnsupportedVolume
	for _, v := range e.Volumes {
		if v.Type != typ {
			rest = append(rest, v)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	return &UnsupportedError{Volumes: rest}
}

// TypeHostPath is the type of hostPath volumes, which Unsupported lists
// (they reach the host: the runtime decides whether it mounts them) and
// SetUp leaves to the runtime.
const TypeHostPath = "hostPath"

// Unsupported returns an *UnsupportedError listing every volume of pod the
// manager does not prepare, with why, or nil when it prepares them all.
// It prepares configMap, secret, downwardAPI, emptyDir (on disk, or in
// memory) and projected volumes of configMap, secret, downwardAPI and
// serviceAccountToken sources. An agent's admission calls it for each pod
// it is given (from the sync loop's goroutine; it is pure), and refuses
// the pod with ReasonUnsupportedVolume and the error's message rather
// than run it without its volumes; a runtime that mounts hostPath volumes
// itself drops those first (Without(TypeHostPath)). A nil pod has nothing
// unsupported.
func Unsupported(pod *v1.Pod) error {
	if pod == nil {
		return nil
	}
	var out []UnsupportedVolume
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if typ, reason := unsupported(v); typ != "" {
			out = append(out, UnsupportedVolume{Name: v.Name, Type: typ, Reason: reason})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &UnsupportedError{Volumes: out}
}

// unsupported returns the type of a volume the manager does not prepare,
// and why; "" for one it prepares.
func unsupported(v *v1.Volume) (typ, reason string) {
	s := &v.VolumeSource
	switch {
	case s.ConfigMap != nil, s.Secret != nil, s.DownwardAPI != nil:
		return "", ""
	case s.EmptyDir != nil:
		switch s.EmptyDir.Medium {
		case v1.StorageMediumDefault, v1.StorageMediumMemory:
			return "", ""
		}
		return "emptyDir", fmt.Sprintf("medium %q is not supported: only the node's disk (\"\") and memory (\"Memory\")", s.EmptyDir.Medium)
	case s.Projected != nil:
		for j, src := range s.Projected.Sources {
			switch {
			case src.ClusterTrustBundle != nil:
				return "projected", fmt.Sprintf("source %d is a clusterTrustBundle: this node has no source of trust bundles", j)
			case src.PodCertificate != nil:
				return "projected", fmt.Sprintf("source %d is a podCertificate: this node issues no pod certificates", j)
			case src.ConfigMap == nil && src.Secret == nil && src.DownwardAPI == nil && src.ServiceAccountToken == nil:
				return "projected", fmt.Sprintf("source %d names no source", j)
			}
		}
		return "", ""
	case s.HostPath != nil:
		return TypeHostPath, "hostPath volumes reach the host: the runtime mounts them or refuses the pod"
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim", "this node attaches no persistent volumes"
	case s.Ephemeral != nil:
		return "ephemeral", "this node provisions no ephemeral volumes"
	case s.CSI != nil:
		return "csi", "this node runs no CSI drivers"
	case s.Image != nil:
		return "image", "this node mounts no image volumes"
	case s.NFS != nil:
		return "nfs", "this node mounts no network file systems"
	case s.GitRepo != nil:
		return "gitRepo", "gitRepo volumes are deprecated and not supported: clone the repository in an init container into an emptyDir"
	}
	if typ := volumeType(s); typ != "" {
		return typ, "this node does not prepare volumes of this type"
	}
	return "none", "the volume names no source"
}

// volumeType names the type of a volume source no case of unsupported
// names, from the API's field names; "" if it has none.
func volumeType(s *v1.VolumeSource) string {
	for _, t := range []struct {
		set  bool
		name string
	}{
		{s.ISCSI != nil, "iscsi"}, {s.Glusterfs != nil, "glusterfs"}, {s.RBD != nil, "rbd"},
		{s.FlexVolume != nil, "flexVolume"}, {s.Cinder != nil, "cinder"}, {s.CephFS != nil, "cephfs"},
		{s.Flocker != nil, "flocker"}, {s.FC != nil, "fc"}, {s.AzureFile != nil, "azureFile"},
		{s.VsphereVolume != nil, "vsphereVolume"}, {s.Quobyte != nil, "quobyte"}, {s.AzureDisk != nil, "azureDisk"},
		{s.PhotonPersistentDisk != nil, "photonPersistentDisk"}, {s.PortworxVolume != nil, "portworxVolume"},
		{s.ScaleIO != nil, "scaleIO"}, {s.StorageOS != nil, "storageos"}, {s.GCEPersistentDisk != nil, "gcePersistentDisk"},
		{s.AWSElasticBlockStore != nil, "awsElasticBlockStore"},
	} {
		if t.set {
			return t.name
		}
	}
	return ""
}
