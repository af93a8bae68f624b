package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// IDsPerPod is how many user and group IDs a pod's user namespace maps:
// IDs 0..IDsPerPod-1 inside the pod are host IDs HostID..HostID+IDsPerPod-1.
const IDsPerPod = 65536

// The sizes of the pod's in-memory filesystems when Config leaves them
// zero: the writable layer over the host's root, /tmp, /run and /dev/shm.
// Each is a tmpfs of its own, so a pod filling one gets ENOSPC there and
// never takes more than that much memory (charged to the pod's memory
// cgroup where there is one).
const (
	DefaultRootSize = 256 << 20
	DefaultTmpSize  = 256 << 20
)

// Config is the pod's sandbox: its namespaces, identity and filesystem.
// The runtime fills it; Spawner.Start checks it (Validate) and hands it
// to the spawner.
type Config struct {
	// Name names the pod in errors ("namespace/name").
	Name string `json:"name"`
	// Hostname is the pod's hostname (its UTS namespace). Ignored with
	// HostNetwork, which keeps the host's name as a kubelet does.
	Hostname string `json:"hostname,omitempty"`
	// HostID is the first host user and group ID of the pod's range of
	// IDsPerPod IDs; root in the pod is HostID on the host. Zero means no
	// user namespace: the pod's processes have the host's identities (a
	// privileged pod, or hostUsers: true). A range must not include host
	// ID 0 and must belong to no other live pod.
	HostID uint32 `json:"hostID"`
	// HostNetwork, HostPID and HostIPC keep the host's namespace of that
	// kind instead of a new one.
	HostNetwork bool `json:"hostNetwork,omitempty"`
	HostPID     bool `json:"hostPID,omitempty"`
	HostIPC     bool `json:"hostIPC,omitempty"`
	// JoinNetNS: the pod's network namespace exists already
	// (Launch.NetNS, made by the agent's pod network and owned by the
	// host's user namespace, so the pod's root cannot reconfigure it): the
	// spawner's setup enters it and the init stays in it, instead of the
	// init making one of its own with only a loopback.
	JoinNetNS bool `json:"joinNetNS,omitempty"`
	// Privileged gives the pod the host's /dev and a writable /sys (for
	// privileged containers). It requires HostID 0.
	Privileged bool `json:"privileged,omitempty"`

	// StageDir is an empty directory the spawner mounts the pod's root on
	// while it builds it, in a mount namespace of the setup's own (the
	// host never sees the mounts). Required; absolute.
	StageDir string `json:"stageDir"`
	// RootSize is the size of the writable layer over the host's root.
	// Defaults to DefaultRootSize.
	RootSize int64 `json:"rootSize,omitempty"`
	// TmpSize is the size of each of /tmp, /run and /dev/shm. Defaults to
	// DefaultTmpSize.
	TmpSize int64 `json:"tmpSize,omitempty"`
	// Masks are host paths the pod must not see: a directory shows empty,
	// a file empty; paths that do not exist are skipped. The agent's state
	// directory (and with it every other pod's), its credentials and
	// configuration belong here.
	Masks []string `json:"masks,omitempty"`
	// Binds are host paths made visible in the pod at a path of their
	// own (the pod's scratch directory, files such as /etc/hosts).
	Binds []Bind `json:"binds,omitempty"`
	// Volumes are the pod's volumes, which containers mount by name
	// (ProcessSpec.Mounts).
	Volumes []Volume `json:"volumes,omitempty"`
	// MountPoints are the paths in the pod where containers mount
	// volumes: created beforehand (as directories, or as files when
	// File), since the host's directories are read-only to the pod.
	MountPoints []MountPoint `json:"mountPoints,omitempty"`
	// Sysctls are set in the pod's namespaces before any container
	// starts; only namespaced ones (net.*, kernel.shm*, kernel.msg*,
	// kernel.sem, fs.mqueue.*) of a namespace the pod does not share with
	// the host.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// MaxProcs, when not zero, is the RLIMIT_NPROC of every process of the
	// pod: a bound on the processes each of its host user IDs may have,
	// for machines without a pids cgroup controller.
	MaxProcs uint64 `json:"maxProcs,omitempty"`
}

// Bind makes the host path Source visible at Target in the pod.
type Bind struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Volume is one of the pod's volumes: a host directory (or file), or,
// with Memory, a tmpfs of SizeLimit bytes (DefaultTmpSize when zero) made
// for the pod and owned by its root.
type Volume struct {
	Name      string `json:"name"`
	Source    string `json:"source,omitempty"`
	Memory    bool   `json:"memory,omitempty"`
	SizeLimit int64  `json:"sizeLimit,omitempty"`
	// Mode and GID, for Memory volumes: the mode of the tmpfs's root and
	// its group inside the pod (fsGroup). Defaults to 0777 and 0.
	Mode uint32 `json:"mode,omitempty"`
	GID  uint32 `json:"gid,omitempty"`
}

// MountPoint is a path in the pod a container mounts a volume on.
type MountPoint struct {
	Path string `json:"path"`
	File bool   `json:"file,omitempty"`
}

// Validate reports what is wrong with c, in the package's words.
func (c *Config) Validate() error {
	if !filepath.IsAbs(c.StageDir) {
		return fmt.Errorf("sandbox: StageDir %q is not an absolute path", c.StageDir)
	}
	if c.HostID != 0 && uint64(c.HostID)+IDsPerPod > 1<<32-1 {
		return fmt.Errorf("sandbox: host ID range %d+%d passes the largest ID", c.HostID, IDsPerPod)
	}
	if c.JoinNetNS && c.HostNetwork {
		return errors.New("sandbox: JoinNetNS and HostNetwork exclude each other")
	}
	if c.Privileged && c.HostID != 0 {
		return errors.New("sandbox: a privileged sandbox has no user namespace (HostID must be 0)")
	}
	if c.RootSize < 0 || c.TmpSize < 0 || c.MaxProcs > 1<<31 {
		return errors.New("sandbox: negative size or MaxProcs out of range")
	}
	for _, p := range c.Masks {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("sandbox: mask %q is not an absolute path", p)
		}
	}
	for _, b := range c.Binds {
		if !filepath.IsAbs(b.Source) || !cleanAbs(b.Target) {
			return fmt.Errorf("sandbox: bind %q -> %q needs absolute, clean paths", b.Source, b.Target)
		}
	}
	names := map[string]bool{}
	for _, v := range c.Volumes {
		if !safeName(v.Name) || names[v.Name] {
			return fmt.Errorf("sandbox: volume name %q is empty, unsafe or repeated", v.Name)
		}
		names[v.Name] = true
		if v.Memory == (v.Source != "") || (!v.Memory && !filepath.IsAbs(v.Source)) {
			return fmt.Errorf("sandbox: volume %q needs either an absolute Source or Memory", v.Name)
		}
		if v.SizeLimit < 0 || v.Mode > 0o7777 || v.GID >= IDsPerPod {
			return fmt.Errorf("sandbox: volume %q has a bad size, mode or group", v.Name)
		}
	}
	for _, m := range c.MountPoints {
		if !cleanAbs(m.Path) || m.Path == "/" {
			return fmt.Errorf("sandbox: mount point %q is not an absolute, clean path below /", m.Path)
		}
	}
	for k := range c.Sysctls {
		if !NamespacedSysctl(k) {
			return fmt.Errorf("sandbox: sysctl %q is not namespaced", k)
		}
		if (strings.HasPrefix(k, "net.") && c.HostNetwork) || (!strings.HasPrefix(k, "net.") && c.HostIPC) {
			return fmt.Errorf("sandbox: sysctl %q would change the host's namespace", k)
		}
	}
	return nil
}

// NamespacedSysctl reports whether the sysctl name (dotted, as in a pod
// spec) belongs to a network or IPC namespace, so that setting it in the
// pod's changes nothing on the host.
func NamespacedSysctl(name string) bool {
	if strings.ContainsAny(name, "/\x00") || strings.Contains(name, "..") {
		return false
	}
	switch {
	case strings.HasPrefix(name, "net."), strings.HasPrefix(name, "kernel.shm"),
		strings.HasPrefix(name, "kernel.msg"), name == "kernel.sem", strings.HasPrefix(name, "fs.mqueue."):
		return true
	}
	return false
}

func cleanAbs(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}
