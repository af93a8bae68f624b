// Package metricsserver is the module that pins metrics-server
// (sigs.k8s.io/metrics-server, a tool of this module's go.mod) with the
// Kubernetes libraries it was released with. It is a module of its own
// because metrics-server v0.8.0 does not run against examples/kube's
// newer k8s.io/apiserver (its OpenAPI model names differ, and it panics at
// start). clustertest.BuildMetricsServer builds the tool from here; there
// is no code to import.
package metricsserver
