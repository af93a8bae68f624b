// Package containerdtest starts a real containerd, with its CRI plugin, for
// the integration tests of the CRI examples (package cri, and the node
// agent's --runtime cri), as shared/CRI.md describes: in a
// temporary directory, with a locally built pause image and a busybox
// image (no registry), and a CNI bridge network that never routes off the
// machine. Everything it starts or creates is stopped and removed when the
// test ends, and what a test leaves behind is reported as an error.
package containerdtest
