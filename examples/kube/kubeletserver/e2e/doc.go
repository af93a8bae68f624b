// Package e2e holds the end-to-end tests of package kubeletserver: the
// real kubectl, through a real API server (package clustertest's
// cluster), against podkit nodes serving the kubelet API with a test
// runtime that runs commands on this machine. It has no code of its own:
// its tests are a package apart because linking a control plane into a
// test binary costs about 3.7 GB and a minute, which kubeletserver's own
// tests should not pay.
package e2e
