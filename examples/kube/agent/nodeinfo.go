package agent

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ContainerRuntimeVersion is the container runtime a podkit node reports
// (kubectl get nodes -o wide shows it): the process runtime of
// examples/nodeagent, which runs containers as processes of the machine.
const ContainerRuntimeVersion = "process://podkit"

// maxInfoFile bounds what systemInfo reads of one system file.
const maxInfoFile = 64 << 10

// systemInfo returns what the Node reports of the machine in
// status.nodeInfo, as a kubelet does: the OS and its image (PRETTY_NAME of
// /etc/os-release), the kernel release, the machine and boot IDs, and the
// runtime. A file that cannot be read leaves its field empty.
func systemInfo() v1.NodeSystemInfo {
	return v1.NodeSystemInfo{
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
		KubeletVersion:          "podkit",
		ContainerRuntimeVersion: ContainerRuntimeVersion,
		OSImage:                 osImage("/etc/os-release"),
		KernelVersion:           firstLine("/proc/sys/kernel/osrelease"),
		MachineID:               firstLine("/etc/machine-id"),
		BootID:                  firstLine("/proc/sys/kernel/random/boot_id"),
	}
}

// osImage returns PRETTY_NAME of the os-release file at path, unquoted.
func osImage(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(io.LimitReader(f, maxInfoFile))
	for s.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "PRETTY_NAME=")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			return u
		}
		return strings.Trim(v, `'"`)
	}
	return ""
}

// firstLine returns the first line of the file at path, trimmed.
func firstLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(io.LimitReader(f, maxInfoFile))
	if s.Scan() {
		return strings.TrimSpace(s.Text())
	}
	return ""
}
