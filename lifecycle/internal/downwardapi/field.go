// Package downwardapi holds the downward API's rules: what a pod's
// fieldRef and resourceFieldRef selectors mean, and how their values are
// written. A container's environment (lifecycle/podenv) and the files of a
// downwardAPI or projected volume (lifecycle/volume) both read a pod
// through them, so the two cannot drift.
//
// The functions are pure: they read the pod and never modify it.
package downwardapi

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Field paths a fieldRef may name, besides the subscripted
// metadata.labels['key'] and metadata.annotations['key'].
const (
	MetadataName        = "metadata.name"
	MetadataNamespace   = "metadata.namespace"
	MetadataUID         = "metadata.uid"
	MetadataLabels      = "metadata.labels"
	MetadataAnnotations = "metadata.annotations"
	SpecNodeName        = "spec.nodeName"
	SpecServiceAccount  = "spec.serviceAccountName"
	StatusPodIP         = "status.podIP"
	StatusPodIPs        = "status.podIPs"
	StatusHostIP        = "status.hostIP"
	StatusHostIPs       = "status.hostIPs"
)

// FieldPath checks a fieldRef's API version and field path and returns the
// path to resolve: an empty version means "v1" (what the API server
// defaults it to; a static pod's manifest may leave it out), and the
// legacy "spec.host" means spec.nodeName, as the API server converts it.
// The error, for a person, says what is not supported.
func FieldPath(apiVersion, fieldPath string) (string, error) {
	if apiVersion != "" && apiVersion != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", apiVersion)
	}
	if path, _, ok := splitSubscript(fieldPath); ok {
		if path != MetadataLabels && path != MetadataAnnotations {
			return "", fmt.Errorf("field label does not support subscript: %s", fieldPath)
		}
		return fieldPath, nil
	}
	if fieldPath == "spec.host" {
		return SpecNodeName, nil
	}
	return fieldPath, nil
}

// MetadataField returns the value of a field path of the pod's metadata:
// name, namespace, uid, the labels or annotations as a whole (formatted by
// FormatMap) or one of them by key (metadata.labels['app'], empty when
// the key is absent). Any other path is an error, as is a subscript that
// is not a valid label or annotation key.
func MetadataField(pod *v1.Pod, fieldPath string) (string, error) {
	if path, key, ok := splitSubscript(fieldPath); ok {
		switch path {
		case MetadataAnnotations:
			if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
			}
			return pod.Annotations[key], nil
		case MetadataLabels:
			if errs := validation.IsQualifiedName(key); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
			}
			return pod.Labels[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support subscript", fieldPath)
	}
	switch fieldPath {
	case MetadataName:
		return pod.Name, nil
	case MetadataNamespace:
		return pod.Namespace, nil
	case MetadataUID:
		return string(pod.UID), nil
	case MetadataLabels:
		return FormatMap(pod.Labels), nil
	case MetadataAnnotations:
		return FormatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", fieldPath)
}

// splitSubscript splits "metadata.labels['key']" into its path and key.
// ok is false for a path with no subscript (or an empty path before it).
func splitSubscript(fieldPath string) (path, key string, ok bool) {
	inner, found := strings.CutSuffix(fieldPath, "']")
	if !found {
		return fieldPath, "", false
	}
	path, key, found = strings.Cut(inner, "['")
	if !found || path == "" {
		return fieldPath, "", false
	}
	return path, key, true
}

// FormatMap writes a map of labels or annotations as a downward API file
// holds it: one key="value" line per key, sorted by key, the value quoted
// as Go quotes strings, with no newline after the last line.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	sort.Strings(keys)
	out := make([]byte, 0, size)
	for i, k := range keys {
		if i > 0 {
			out = append(out, '\n')
		}
		out = append(out, k...)
		out = append(out, '=')
		out = strconv.AppendQuote(out, m[k])
	}
	return string(out)
}
