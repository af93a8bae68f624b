package sandbox

import (
	"fmt"
	"math/bits"
	"strings"
)

// CapabilitySet is a set of Linux capabilities, bit n for capability n.
type CapabilitySet uint64

// capabilityNames are the capabilities by number, without the CAP_
// prefix, as a pod spec names them.
var capabilityNames = [...]string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// AllCapabilities is every capability this package knows of.
const AllCapabilities CapabilitySet = 1<<len(capabilityNames) - 1

// DefaultCapabilities is the set a container keeps when its spec adds
// and drops none: containerd's default (CHOWN, DAC_OVERRIDE, FSETID,
// FOWNER, MKNOD, NET_RAW, SETGID, SETUID, SETFCAP, SETPCAP,
// NET_BIND_SERVICE, SYS_CHROOT, KILL, AUDIT_WRITE). In the pod's user
// namespace each acts on the pod's own IDs, files and namespaces only.
var DefaultCapabilities = mustCapabilities("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW",
	"SETGID", "SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE")

// Capability returns the capability named name ("NET_ADMIN", or
// "CAP_NET_ADMIN"; any case), or an error naming it.
func Capability(name string) (CapabilitySet, error) {
	n := strings.TrimPrefix(strings.ToUpper(name), "CAP_")
	for i, c := range capabilityNames {
		if c == n {
			return 1 << i, nil
		}
	}
	return 0, fmt.Errorf("sandbox: unknown capability %q", name)
}

func mustCapabilities(names ...string) CapabilitySet {
	var s CapabilitySet
	for _, n := range names {
		c, err := Capability(n)
		if err != nil {
			panic(err)
		}
		s |= c
	}
	return s
}

// Has reports whether s holds every capability of c.
func (s CapabilitySet) Has(c CapabilitySet) bool { return s&c == c }

// String lists the set's names, comma-separated, in number order.
func (s CapabilitySet) String() string {
	var names []string
	for s != 0 {
		i := bits.TrailingZeros64(uint64(s))
		if i < len(capabilityNames) {
			names = append(names, capabilityNames[i])
		} else {
			names = append(names, fmt.Sprintf("%d", i))
		}
		s &^= 1 << i
	}
	return strings.Join(names, ",")
}
