package mirror

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PrepareStaticPod fills in, in place, the fields a static pod read from a
// manifest needs before an agent runs it, the way the kubelet does for its
// file and HTTP sources:
//
//   - an empty UID becomes a hex FNV-128a hash of the pod as given (its
//     JSON encoding) plus nodeName and source, so the same manifest on the
//     same node always gets the same UID and any change gives a new one;
//     a UID already set is kept;
//   - the name gets "-" and the lowercased nodeName appended, so static pods
//     of different nodes do not collide in the API server;
//   - an empty namespace becomes "default";
//   - spec.nodeName is set to nodeName;
//   - ConfigHashAnnotationKey is set to the UID and ConfigSourceAnnotationKey
//     to source;
//   - for FileSource, a toleration of every NoExecute taint is added (an
//     existing operator-Exists NoExecute toleration with no key is replaced),
//     so node problems do not evict the node's own file pods;
//   - status.phase is set to Pending.
//
// The prepared pod is then checked with ValidatePodObject, as the kubelet
// validates a static pod before admitting it.
//
// source is the source name (FileSource, HTTPSource, or an agent's own);
// ApiserverSource or "" is refused, since such a pod would not be static.
// The UID is stable and unique per node, but it is not byte-for-byte the
// kubelet's: the kubelet hashes its internal pod type with a different
// encoding and mixes in the manifest's path or URL rather than the source
// name, so the same manifest in two files on one node gets one UID here.
//
// The caller owns pod and must not share it with other goroutines during the
// call. The annotation map and toleration slice are replaced by new ones, so
// a shallow copy of pod made before the call is not affected. Calling it
// twice on one pod appends the node name twice; call it once per manifest
// read. On error pod is left unchanged.
//
// Errors (prefixed "mirror: "): a nil pod, an empty name, an empty nodeName,
// a name or namespace containing "_" (it would break full names), a refused
// source (wrapping ErrNotStaticPod), a pod that cannot be encoded, or an
// invalid pod (ValidatePodObject's error, naming every invalid field).
func PrepareStaticPod(pod *v1.Pod, nodeName, source string) error {
	switch {
	case pod == nil:
		return errors.New("mirror: PrepareStaticPod: nil pod")
	case pod.Name == "":
		return errors.New("mirror: PrepareStaticPod: the pod has no name")
	case nodeName == "":
		return fmt.Errorf("mirror: PrepareStaticPod %q: empty node name", pod.Name)
	case source == "" || source == ApiserverSource:
		return fmt.Errorf("%w: PrepareStaticPod %q: source %q cannot give a static pod", ErrNotStaticPod, pod.Name, source)
	case strings.Contains(pod.Name, "_") || strings.Contains(pod.Namespace, "_"):
		return fmt.Errorf("mirror: PrepareStaticPod %q: name and namespace must not contain %q", pod.Name+"/"+pod.Namespace, "_")
	}

	uid := pod.UID
	if uid == "" {
		var err error
		if uid, err = staticPodUID(pod, nodeName, source); err != nil {
			return err
		}
	}

	// Prepare a shallow copy, validate it, and only then write it back.
	p := *pod
	p.UID = uid
	p.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	p.Spec.NodeName = nodeName

	annotations := make(map[string]string, len(pod.Annotations)+2)
	maps.Copy(annotations, pod.Annotations)
	annotations[ConfigHashAnnotationKey] = string(uid)
	annotations[ConfigSourceAnnotationKey] = source
	p.Annotations = annotations

	if source == FileSource {
		p.Spec.Tolerations = withNoExecuteToleration(pod.Spec.Tolerations)
	}
	p.Status.Phase = v1.PodPending
	if err := ValidatePodObject(&p); err != nil {
		return err
	}
	*pod = p
	return nil
}

// staticPodUID derives a UID from the pod's content, the node and the
// source. JSON is used because encoding/json writes struct fields in a fixed
// order and sorts map keys, so equal pods always encode to equal bytes.
func staticPodUID(pod *v1.Pod, nodeName, source string) (types.UID, error) {
	encoded, err := json.Marshal(pod)
	if err != nil {
		return "", fmt.Errorf("mirror: PrepareStaticPod %q: encoding the pod to derive its UID: %w", pod.Name, err)
	}
	h := fnv.New128a()
	h.Write(encoded) // a hash.Hash never returns an error from Write
	fmt.Fprintf(h, "host:%s", nodeName)
	fmt.Fprintf(h, "source:%s", source)
	return types.UID(hex.EncodeToString(h.Sum(nil))), nil
}

// withNoExecuteToleration returns a new slice holding tolerations plus one
// that tolerates every NoExecute taint, replacing an existing toleration with
// the same key, operator, value and effect.
func withNoExecuteToleration(tolerations []v1.Toleration) []v1.Toleration {
	want := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	out := slices.Clone(tolerations)
	for i, t := range out {
		if t.Key == want.Key && t.Operator == want.Operator && t.Value == want.Value && t.Effect == want.Effect {
			out[i] = want
			return out
		}
	}
	return append(out, want)
}
