package processruntime

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
	"github.com/podkit/podkit/lifecycle/volume"
)

// VolumeSource provides the content of the volumes the runtime does not
// make itself (configMap, secret, downwardAPI, projected, ...): the host
// path of a directory (or file) holding it, ready before the pod's sandbox
// starts (SyncPod, before the pod's first container), bound into the
// sandbox and mounted by the containers that ask for it. The runtime
// makes emptyDir volumes and binds hostPath ones itself.
//
// VolumeDir is called from SyncPod, once per sandbox start and volume; it
// must not block for long. An error fails the sandbox's start (SyncPod is
// retried, and the pod gets a FailedCreatePodSandBox warning saying why).
type VolumeSource interface {
	VolumeDir(pod *v1.Pod, volume *v1.Volume) (path string, err error)
}

// VolumeSourceFunc adapts a function to VolumeSource.
type VolumeSourceFunc func(pod *v1.Pod, volume *v1.Volume) (string, error)

// VolumeDir calls f.
func (f VolumeSourceFunc) VolumeDir(pod *v1.Pod, volume *v1.Volume) (string, error) {
	return f(pod, volume)
}

var _ VolumeSource = VolumeSourceFunc(nil)

// ScratchPath is where a sandboxed pod sees its scratch directory (the
// default working directory of its containers): at a path of its own, as
// the directories above the scratch directory's host path are the state
// directory's, out of the pod's reach.
const ScratchPath = "/scratch"

// ReasonVolumeNotProvided is the warning a pod gets for a volume the
// runtime does not make and Options.Volumes does not provide: it is
// mounted as an empty, read-only directory.
const ReasonVolumeNotProvided = "VolumeNotProvided"

// sandboxConfig is the sandbox of pod: its namespaces and identity, its
// scratch directory at ScratchPath, its volumes and their mount
// points, and the masks. It creates the pod's scratch and emptyDir
// directories, owned by the pod's root (hostID) and writable by all its
// users, as a kubelet's emptyDir is, with the fsGroup's group. The
// warnings are for the pod's events.
func (r *Runtime) sandboxConfig(p *podState, pod *v1.Pod, hostID uint32, stage string) (*sandbox.Config, []reasonMessage, error) {
	spec := &pod.Spec
	var fsGroup int64
	cfg := &sandbox.Config{
		Name:        podName(pod),
		Hostname:    podHostname(pod),
		HostID:      hostID,
		HostNetwork: spec.HostNetwork,
		HostPID:     spec.HostPID,
		HostIPC:     spec.HostIPC,
		Privileged:  noUserNamespace(pod) && hasPrivileged(pod),
		StageDir:    stage,
		Masks:       r.masks,
	}
	if sc := spec.SecurityContext; sc != nil {
		if sc.FSGroup != nil {
			fsGroup = *sc.FSGroup
		}
		for _, s := range sc.Sysctls {
			if cfg.Sysctls == nil {
				cfg.Sysctls = map[string]string{}
			}
			cfg.Sysctls[s.Name] = s.Value
		}
	}
	scratch := filepath.Join(p.dir, scratchDir)
	if err := ownedByPod(scratch, hostID, fsGroup); err != nil {
		return nil, nil, err
	}
	cfg.Binds = []sandbox.Bind{{Source: scratch, Target: ScratchPath}}
	var warnings []reasonMessage
	sources := map[string]string{}
	var managed *volume.Manager
	if f := r.podFeatures(); f != nil && r.volumeSource == nil {
		managed = f.Volumes
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		sv := sandbox.Volume{Name: v.Name}
		switch {
		case managed != nil && v.HostPath == nil:
			// Its content is the volume manager's, set up by SyncPod
			// before the sandbox starts; updates show through the bind.
			path, err := managed.HostPath(pod.UID, v.Name)
			if err != nil {
				return nil, nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			sv.Source = path
		case v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumMemory:
			sv.Memory, sv.Mode, sv.GID = true, 0o777, uint32(fsGroup)
			if hostID == 0 {
				sv.GID = 0
			}
			if fsGroup != 0 {
				sv.Mode |= 0o2000
			}
			if v.EmptyDir.SizeLimit != nil {
				sv.SizeLimit = v.EmptyDir.SizeLimit.Value()
			}
		case v.EmptyDir != nil:
			sv.Source = filepath.Join(p.dir, volumesDir, v.Name)
			if err := ownedByPod(sv.Source, hostID, fsGroup); err != nil {
				return nil, nil, err
			}
		case v.HostPath != nil:
			if err := prepareHostPath(v.HostPath); err != nil {
				return nil, nil, fmt.Errorf("hostPath volume %q: %w", v.Name, err)
			}
			sv.Source = v.HostPath.Path
		case r.volumeSource != nil:
			path, err := r.volumeSource.VolumeDir(pod, v)
			if err != nil {
				return nil, nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			sv.Source = path
		default:
			sv.Source = filepath.Join(p.dir, volumesDir, v.Name)
			if err := os.MkdirAll(sv.Source, 0o555); err != nil {
				return nil, nil, err
			}
			warnings = append(warnings, reasonMessage{ReasonVolumeNotProvided, fmt.Sprintf("volume %q (%s) is not provided on this node: its mounts are an empty, read-only directory", v.Name, volumeKind(v))})
		}
		sources[v.Name] = sv.Source
		cfg.Volumes = append(cfg.Volumes, sv)
	}
	seen := map[string]bool{}
	for _, c := range allContainers(pod) {
		for _, m := range c.VolumeMounts {
			path := filepath.Clean(m.MountPath)
			if seen[path] {
				continue
			}
			seen[path] = true
			src := sources[m.Name]
			if m.SubPath != "" && src != "" {
				src = filepath.Join(src, m.SubPath)
			}
			fi, err := os.Stat(src)
			cfg.MountPoints = append(cfg.MountPoints, sandbox.MountPoint{Path: path, File: src != "" && err == nil && !fi.IsDir()})
		}
	}
	return cfg, warnings, nil
}

func hasPrivileged(pod *v1.Pod) bool {
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	return false
}

// ownedByPod creates dir, owned by the pod's root and group (fsGroup's
// when set), writable by every user of the pod (0777; with fsGroup, new
// files take its group).
func ownedByPod(dir string, hostID uint32, fsGroup int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o777)
	if fsGroup != 0 {
		mode |= os.ModeSetgid
	}
	if hostID != 0 {
		if err := os.Chown(dir, int(hostID), int(hostID)+int(fsGroup)); err != nil {
			return err
		}
	} else if fsGroup != 0 {
		if err := os.Chown(dir, 0, int(fsGroup)); err != nil {
			return err
		}
	}
	return os.Chmod(dir, mode)
}

// prepareHostPath checks (or creates) a hostPath volume's path as its
// type says, as the kubelet does.
func prepareHostPath(h *v1.HostPathVolumeSource) error {
	typ := v1.HostPathUnset
	if h.Type != nil {
		typ = *h.Type
	}
	fi, err := os.Stat(h.Path)
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if err != nil {
			return os.MkdirAll(h.Path, 0o755)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", h.Path)
		}
		return nil
	case v1.HostPathFileOrCreate:
		if err != nil {
			if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(h.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory, not a file", h.Path)
		}
		return nil
	}
	if err != nil {
		return err
	}
	mode := fi.Mode()
	ok := map[v1.HostPathType]bool{
		v1.HostPathDirectory: mode.IsDir(),
		v1.HostPathFile:      mode.IsRegular(),
		v1.HostPathSocket:    mode&os.ModeSocket != 0,
		v1.HostPathCharDev:   mode&os.ModeCharDevice != 0,
		v1.HostPathBlockDev:  mode&os.ModeDevice != 0 && mode&os.ModeCharDevice == 0,
	}
	if !ok[typ] {
		return fmt.Errorf("%s is not a %s", h.Path, typ)
	}
	return nil
}

// volumeKind names a volume's source type, for messages.
func volumeKind(v *v1.Volume) string {
	switch {
	case v.ConfigMap != nil:
		return "configMap"
	case v.Secret != nil:
		return "secret"
	case v.Projected != nil:
		return "projected"
	case v.DownwardAPI != nil:
		return "downwardAPI"
	case v.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case v.Ephemeral != nil:
		return "ephemeral"
	case v.Image != nil:
		return "image"
	case v.CSI != nil:
		return "csi"
	case v.NFS != nil:
		return "nfs"
	}
	return "this kind of volume"
}
