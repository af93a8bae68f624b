//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const (
	seccompArch = unix.AUDIT_ARCH_AARCH64
	seccompX32  = false
)

// seccompArchRules: arm64 has none of the old calls amd64 refuses.
var seccompArchRules []seccompRule
