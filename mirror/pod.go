package mirror

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Annotation keys a node agent reads and writes on pods. They are the keys
// the kubelet uses, so pods and mirror pods interoperate with it.
const (
	// ConfigSourceAnnotationKey names the source a pod came from: one of
	// FileSource, HTTPSource, ApiserverSource (or an agent's own source
	// name). Any value other than ApiserverSource makes the pod static.
	ConfigSourceAnnotationKey = "kubernetes.io/config.source"
	// ConfigHashAnnotationKey holds a static pod's hash; PrepareStaticPod
	// sets it to the pod's UID.
	ConfigHashAnnotationKey = "kubernetes.io/config.hash"
	// ConfigMirrorAnnotationKey marks a mirror pod. Its value is the hash
	// of the static pod the mirror stands for. Its presence alone, with any
	// value, makes a pod a mirror pod.
	ConfigMirrorAnnotationKey = v1.MirrorPodAnnotationKey
	// ConfigFirstSeenAnnotationKey records when a source first saw a pod.
	ConfigFirstSeenAnnotationKey = "kubernetes.io/config.seen"
)

// Source names, the values of ConfigSourceAnnotationKey.
const (
	// FileSource is a manifest file on the node.
	FileSource = "file"
	// HTTPSource is a manifest fetched from a URL.
	HTTPSource = "http"
	// ApiserverSource is the API server. Pods from it are never static.
	ApiserverSource = "api"
)

// ErrInvalidFullName is wrapped by the errors ParsePodFullName and
// DeleteMirrorPod return for a malformed full name; test with errors.Is.
var ErrInvalidFullName = errors.New("mirror: invalid pod full name")

// PodSource returns the value of pod's ConfigSourceAnnotationKey annotation
// and whether it is present. A nil pod has no source.
func PodSource(pod *v1.Pod) (string, bool) {
	if pod == nil {
		return "", false
	}
	source, ok := pod.Annotations[ConfigSourceAnnotationKey]
	return source, ok
}

// IsStaticPod reports whether pod came from a source other than the API
// server: its ConfigSourceAnnotationKey annotation is present and is not
// ApiserverSource. A nil pod is not static.
//
// The answer is only as trustworthy as the annotation: an agent must stamp
// the source itself rather than trust one the pod arrived with.
func IsStaticPod(pod *v1.Pod) bool {
	source, ok := PodSource(pod)
	return ok && source != ApiserverSource
}

// IsMirrorPod reports whether pod is a mirror pod: it carries the
// ConfigMirrorAnnotationKey annotation, whatever its value (an empty value
// counts). A nil pod is not a mirror pod.
func IsMirrorPod(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	_, ok := pod.Annotations[ConfigMirrorAnnotationKey]
	return ok
}

// IsMirrorPodOf reports whether mirror is the current mirror of pod: both
// have the same name and namespace, mirror carries the
// ConfigMirrorAnnotationKey annotation, and its value equals pod's
// ConfigHashAnnotationKey annotation (absent counts as ""). A mirror left
// over from an older version of the static pod has another hash and is not
// its mirror. Nil arguments give false.
func IsMirrorPodOf(mirror, pod *v1.Pod) bool {
	if mirror == nil || pod == nil {
		return false
	}
	if mirror.Name != pod.Name || mirror.Namespace != pod.Namespace {
		return false
	}
	hash, ok := mirror.Annotations[ConfigMirrorAnnotationKey]
	return ok && hash == pod.Annotations[ConfigHashAnnotationKey]
}

// PodFullName returns pod's full name, "name_namespace", the key a static pod
// and its mirror share. Neither a pod name nor a namespace may contain "_",
// so the key is unambiguous for valid pods. A nil pod gives "".
func PodFullName(pod *v1.Pod) string {
	if pod == nil {
		return ""
	}
	return BuildPodFullName(pod.Name, pod.Namespace)
}

// BuildPodFullName returns the full name "name_namespace" of a pod with the
// given name and namespace.
func BuildPodFullName(name, namespace string) string {
	return name + "_" + namespace
}

// ParsePodFullName splits a full name made by PodFullName into the pod's name
// and namespace. It accepts only exactly one "_" with a non-empty part on
// each side; anything else gives an error wrapping ErrInvalidFullName.
func ParsePodFullName(fullName string) (name, namespace string, err error) {
	name, namespace, found := strings.Cut(fullName, "_")
	if !found || name == "" || namespace == "" || strings.Contains(namespace, "_") {
		return "", "", fmt.Errorf("%w %q: want exactly one %q between a non-empty name and namespace",
			ErrInvalidFullName, fullName, "_")
	}
	return name, namespace, nil
}
