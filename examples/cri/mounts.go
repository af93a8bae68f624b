package cri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/volume"
)

// ReasonFailedMount is the event reason of a hostPath volume that does not
// match its type (lifecycle/volume records its own volumes' failures with
// the same reason).
const ReasonFailedMount = volume.ReasonFailedMount

// setUpVolumes prepares pod's volumes before any container starts, at every
// sync: the content of those the volume manager handles (SetUp: its
// failures are FailedMount events it recorded, and the pod waits in
// ContainerCreating, retried), and the hostPath ones the syncer mounts
// itself (checked against their type, created for DirectoryOrCreate and
// FileOrCreate; a mismatch is a FailedMount event).
func (s *Syncer) setUpVolumes(ctx context.Context, pod *v1.Pod) error {
	prim := s.features()
	managed := false
	var errs []error
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			managed = true
			continue
		}
		if err := checkHostPath(v.HostPath); err != nil {
			msg := fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", v.Name, err)
			s.containerEvent(pod, "", v1.EventTypeWarning, ReasonFailedMount, msg)
			errs = append(errs, fmt.Errorf("cri: pod %s: %s", podRef(pod), msg))
		}
	}
	if managed && prim.volumes != nil {
		if err := prim.volumes.SetUp(ctx, pod); err != nil {
			errs = append(errs, fmt.Errorf("cri: the volumes of pod %s are not ready: %w", podRef(pod), err))
		}
	}
	return errors.Join(errs...)
}

// knownHostPathType reports whether the syncer checks hostPath volumes of
// type t (every type of the API).
func knownHostPathType(t *v1.HostPathType) bool {
	if t == nil {
		return true
	}
	switch *t {
	case v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
		v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev:
		return true
	}
	return false
}

// checkHostPath checks a hostPath volume's path against its type, as the
// kubelet's hostPath plugin does, creating it for the *OrCreate types
// (a directory 0755, with its parents; an empty file 0644, in an existing
// directory).
func checkHostPath(hp *v1.HostPathVolumeSource) error {
	if !filepath.IsAbs(hp.Path) {
		return fmt.Errorf("hostPath %q is not absolute", hp.Path)
	}
	t := v1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	fi, err := os.Stat(hp.Path)
	switch {
	case t == v1.HostPathUnset:
		return nil
	case errors.Is(err, fs.ErrNotExist) && t == v1.HostPathDirectoryOrCreate:
		return os.MkdirAll(hp.Path, 0o755)
	case errors.Is(err, fs.ErrNotExist) && t == v1.HostPathFileOrCreate:
		f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case err != nil:
		return fmt.Errorf("hostPath type check failed: %s is not a %s: %w", hp.Path, t, err)
	}
	mode := fi.Mode()
	ok := false
	switch t {
	case v1.HostPathDirectoryOrCreate, v1.HostPathDirectory:
		ok = mode.IsDir()
	case v1.HostPathFileOrCreate, v1.HostPathFile:
		ok = mode.IsRegular()
	case v1.HostPathSocket:
		ok = mode&fs.ModeSocket != 0
	case v1.HostPathCharDev:
		ok = mode&fs.ModeCharDevice != 0
	case v1.HostPathBlockDev:
		ok = mode&fs.ModeDevice != 0 && mode&fs.ModeCharDevice == 0
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", hp.Path, t)
	}
	return nil
}

// mounts are the CRI Mounts of c's volume mounts, in order: the directory
// the volume manager prepared for the volume (HostPath), or the resolved
// subPath in it (SubPath, after podenv's expansion of a subPathExpr), or
// the hostPath volume's path (with the subPath joined); at the mount's
// mountPath, read-only when the mount asks or the volume is a
// configMap, secret, downwardAPI or projected one (as on a kubelet), with
// the mount's propagation. A mount that cannot be made now is a
// waitingError (CreateContainerConfigError).
func (s *Syncer) mounts(pod *v1.Pod, c *v1.Container, env []podenv.EnvVar) ([]*runtimeapi.Mount, error) {
	prim := s.features()
	out := make([]*runtimeapi.Mount, 0, len(c.VolumeMounts))
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		fail := func(format string, args ...any) error {
			return &waitingError{container: c.Name, reason: ReasonCreateContainerConfigError, message: fmt.Sprintf(format, args...)}
		}
		vol := podVolume(pod, m.Name)
		if vol == nil {
			return nil, fail("cannot find volume %q to mount into container %q", m.Name, c.Name)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			var err error
			if sub, err = prim.env.ExpandSubPathExpr(c, m, env); err != nil {
				return nil, asWaiting(c.Name, err)
			}
		}
		mount := &runtimeapi.Mount{ContainerPath: m.MountPath, Readonly: m.ReadOnly || apiDataVolume(vol)}
		switch {
		case vol.HostPath != nil:
			host, err := hostSubPath(vol.HostPath.Path, sub)
			if err != nil {
				return nil, fail("volume mount %q of container %q: %v", m.Name, c.Name, err)
			}
			mount.HostPath = host
		case prim.volumes == nil:
			return nil, fail("volume %q needs a volume manager, and the syncer has none", m.Name)
		case sub != "":
			host, err := prim.volumes.SubPath(pod.UID, m.Name, sub)
			if err != nil {
				return nil, fail("failed to prepare subPath for volumeMount %q of container %q: %v", m.Name, c.Name, err)
			}
			mount.HostPath = host
		default:
			host, err := prim.volumes.HostPath(pod.UID, m.Name)
			if err != nil {
				return nil, fail("volume %q of container %q is not ready: %v", m.Name, c.Name, err)
			}
			mount.HostPath = host
		}
		if m.MountPropagation != nil {
			switch *m.MountPropagation {
			case v1.MountPropagationHostToContainer:
				mount.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case v1.MountPropagationBidirectional:
				mount.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		if m.RecursiveReadOnly != nil && *m.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled {
			mount.RecursiveReadOnly = true
		}
		out = append(out, mount)
	}
	return out, nil
}

// podVolume returns pod's volume named name, or nil.
func podVolume(pod *v1.Pod, name string) *v1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// apiDataVolume reports whether v holds data from the API (configMap,
// secret, downwardAPI, projected), which containers always mount
// read-only, as on a kubelet: only the volume manager writes it.
func apiDataVolume(v *v1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// hostSubPath is subPath inside the hostPath root: a relative path with no
// ".." component, created as a directory when missing (as the kubelet
// creates a missing subPath). Links inside it are not resolved: a hostPath
// volume reaches the host anyway.
func hostSubPath(root, subPath string) (string, error) {
	if subPath == "" {
		return root, nil
	}
	if path.IsAbs(subPath) || strings.HasPrefix(subPath, "/") {
		return "", fmt.Errorf("subPath %q is absolute", subPath)
	}
	for _, part := range strings.Split(subPath, "/") {
		if part == ".." {
			return "", fmt.Errorf("subPath %q holds ..", subPath)
		}
	}
	p := filepath.Join(root, filepath.FromSlash(subPath))
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", err
		}
	}
	return p, nil
}

// podIPs are the addresses the pod's environment, probes and hooks see:
// the node's (Options.NodeIPs) for a host-network pod, else the ready
// sandbox's.
func (s *Syncer) podIPs(pod *v1.Pod, status *PodStatus) []string {
	if pod.Spec.HostNetwork {
		return s.opts.NodeIPs
	}
	return status.IPs()
}

// sandboxIPs are the addresses of the sandbox id, which just ran (the
// status read before it does not have it).
func (s *Syncer) sandboxIPs(ctx context.Context, pod *v1.Pod, id string) ([]string, error) {
	if pod.Spec.HostNetwork {
		return s.opts.NodeIPs, nil
	}
	resp, err := s.sandboxes.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return nil, fmt.Errorf("cri: reading the status of sandbox %s of pod %s: %w", id, podRef(pod), err)
	}
	return (&PodStatus{Sandboxes: []*runtimeapi.PodSandboxStatus{resp.GetStatus()}}).IPs(), nil
}
