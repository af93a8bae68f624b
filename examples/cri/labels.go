package cri

import (
	"maps"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels the syncer puts on every sandbox and container it creates. The
// pod and container keys are the ones the kubelet uses, so crictl and other
// tools that know them (crictl pods --label, crictl ps --name) work as
// usual; LabelManaged marks what this package created, so that RuntimePods
// never reports a pod some other agent of the same runtime owns.
const (
	// LabelPodName holds the pod's name.
	LabelPodName = "io.kubernetes.pod.name"
	// LabelPodNamespace holds the pod's namespace.
	LabelPodNamespace = "io.kubernetes.pod.namespace"
	// LabelPodUID holds the pod's UID. Every lookup of a pod's sandboxes
	// and containers filters on it.
	LabelPodUID = "io.kubernetes.pod.uid"
	// LabelContainerName holds the name of the container in the pod spec
	// (containers only).
	LabelContainerName = "io.kubernetes.container.name"
	// LabelManaged is "true" on everything this package creates.
	LabelManaged = "io.podkit.managed"
)

// sandboxFilter selects a pod's sandboxes by UID.
func sandboxFilter(uid types.UID) *runtimeapi.PodSandboxFilter {
	return &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelPodUID: string(uid)}}
}

// containerFilter selects a pod's containers by UID.
func containerFilter(uid types.UID) *runtimeapi.ContainerFilter {
	return &runtimeapi.ContainerFilter{LabelSelector: map[string]string{LabelPodUID: string(uid)}}
}

// podLabels are the labels of a pod's sandbox: the pod's own labels, then
// the identifying ones (which win over a pod label of the same key).
func podLabels(name, namespace string, uid types.UID, extra map[string]string) map[string]string {
	l := make(map[string]string, len(extra)+4)
	maps.Copy(l, extra)
	l[LabelPodName] = name
	l[LabelPodNamespace] = namespace
	l[LabelPodUID] = string(uid)
	l[LabelManaged] = "true"
	return l
}
