package volume

import (
	"fmt"
	"io/fs"
	"os"

	v1 "k8s.io/api/core/v1"
)

// IDMapper maps the user and group ids a pod's containers see to the
// host's: a runtime that runs each pod in a user namespace maps the pod's
// ids onto a host range of its own, and the files of the pod's volumes
// must belong to the host ids its root (or fsGroup, or a file's user)
// stands for. It is called from SetUp's and Run's goroutines, for any
// pod; an error (an id outside the pod's range) fails the volume's setup.
type IDMapper func(pod *v1.Pod, uid, gid int) (hostUID, hostGID int, err error)

// owner is who a file belongs to on the host.
type owner struct{ uid, gid int }

// ownership decides who owns a pod's volume files, and their modes, as
// the kubelet does: files and directories belong to the pod's root (or
// to a file's user: its user field, the volume's defaultUser, or for a
// token the containers' common user), in the pod's fsGroup when it has
// one, and then a group can read what its owner can.
type ownership struct {
	pod     *v1.Pod
	fsGroup *int64
	// fsUser is the user every container of the pod runs as, when they all
	// name the same one (the owner of service-account tokens), else nil.
	fsUser *int64
	mapIDs IDMapper
}

func newOwnership(pod *v1.Pod, mapIDs IDMapper) ownership {
	o := ownership{pod: pod, fsUser: commonRunAsUser(pod), mapIDs: mapIDs}
	if sc := pod.Spec.SecurityContext; sc != nil {
		o.fsGroup = sc.FSGroup
	}
	return o
}

// host returns the host owner of a file of user (nil: the pod's root),
// mapped through the pod's id mapping.
func (o ownership) host(user *int64) (_ owner, err error) {
	uid, gid := int64(0), int64(0)
	if user != nil {
		uid = *user
	}
	if o.fsGroup != nil {
		gid = *o.fsGroup
	}
	if uid < 0 || gid < 0 || uid > 1<<31-1 || gid > 1<<31-1 {
		return owner{}, fmt.Errorf("invalid owner %d:%d", uid, gid)
	}
	if o.mapIDs == nil {
		return owner{int(uid), int(gid)}, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the id mapping panicked: %v", r)
		}
	}()
	hu, hg, err := o.mapIDs(o.pod, int(uid), int(gid))
	if err != nil {
		return owner{}, fmt.Errorf("mapping owner %d:%d to the host: %w", uid, gid, err)
	}
	if hu < 0 || hg < 0 {
		return owner{}, fmt.Errorf("the id mapping gave the negative host owner %d:%d for %d:%d", hu, hg, uid, gid)
	}
	return owner{hu, hg}, nil
}

// fileMode returns the mode of a projected file: its own, plus group read
// when the pod has an fsGroup (the kubelet's ownership change of a
// read-only volume).
func (o ownership) fileMode(mode int32) fs.FileMode {
	m := fs.FileMode(mode) & fs.ModePerm
	if o.fsGroup != nil {
		m |= 0o440
	}
	return m
}

// dirMode returns the mode of a directory of a projected volume.
func (o ownership) dirMode() fs.FileMode {
	if o.fsGroup != nil {
		return 0o755 | fs.ModeSetgid
	}
	return 0o755
}

// tokenMode returns the mode of a service-account token file: 0600 when
// it belongs to a user other than the pod's root or the pod has an
// fsGroup (then 0640: see fileMode), else the volume's mode.
func (o ownership) tokenMode(user *int64, volumeMode int32) int32 {
	if user != nil || o.fsGroup != nil {
		return 0o600
	}
	return volumeMode
}

// commonRunAsUser returns the user every container of pod (init,
// regular and ephemeral) runs as, by its own security context or the
// pod's, when they all have one and it is the same; else nil.
func commonRunAsUser(pod *v1.Pod) *int64 {
	var user *int64
	check := func(c *v1.SecurityContext) bool {
		u := effectiveRunAsUser(pod, c)
		if u == nil || (user != nil && *user != *u) {
			return false
		}
		user = u
		return true
	}
	for i := range pod.Spec.InitContainers {
		if !check(pod.Spec.InitContainers[i].SecurityContext) {
			return nil
		}
	}
	for i := range pod.Spec.Containers {
		if !check(pod.Spec.Containers[i].SecurityContext) {
			return nil
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if !check(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return nil
		}
	}
	return user
}

// effectiveRunAsUser is a container's runAsUser, else the pod's.
func effectiveRunAsUser(pod *v1.Pod, c *v1.SecurityContext) *int64 {
	if c != nil && c.RunAsUser != nil {
		return c.RunAsUser
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.RunAsUser
	}
	return nil
}

// chown sets path's owner (not following a symbolic link), unless it is
// already o.
func chown(path string, o owner) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if uid, gid, ok := fileOwner(fi); ok && uid == o.uid && gid == o.gid {
		return nil
	}
	return os.Lchown(path, o.uid, o.gid)
}
