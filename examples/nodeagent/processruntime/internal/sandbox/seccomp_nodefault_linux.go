//go:build linux && !amd64 && !arm64

package sandbox

// No RuntimeDefault filter is written for this architecture: pods asking
// for it are refused (SeccompSupported).
const (
	seccompArch = 0
	seccompX32  = false
)

var seccompRules []seccompRule
