package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/internal/apiobject"
	"github.com/podkit/podkit/lifecycle/podenv"
)

// Manager prepares, updates and removes the volumes of a node's pods. Create
// it with New; its methods are safe for concurrent use.
type Manager struct {
	root     string
	objects  podenv.Objects
	pods     ContentRemovalChecker
	tokens   TokenRequester
	recorder event.Recorder
	logger   logr.Logger
	clock    clock.WithTicker
	opts     Options
	// wake tells Run (1-buffered, sent without blocking) that a SetUp may
	// have moved the earliest token refresh.
	wake chan struct{}

	mu sync.Mutex
	// recs holds a record for each pod SetUp was called for, whose
	// volumes were not torn down since. A record leaves recs only with
	// its removed flag set (under its own mu).
	recs map[types.UID]*podRecord
	// ran is set once Run is called.
	ran bool
}

var _ podenv.VolumeFiles = (*Manager)(nil)

// podRecord is what the manager keeps of one pod.
type podRecord struct {
	uid types.UID
	// dir is <root>/<uid>.
	dir string

	// mu serializes the pod's setup, refresh and teardown, and is held
	// for their I/O. Lock order: a record's mu, then Manager.mu (never
	// the other way).
	mu sync.Mutex
	// The fields below are guarded by mu.
	//
	// pod is the pod of the last SetUp (shared, never modified).
	pod *v1.Pod
	// removed is set once the pod's volumes are torn down; the record is
	// then out of Manager.recs, and a SetUp makes a new one.
	removed bool
	// written is what the last write of each written volume left.
	written map[string]*writeState
	// tokens are the pod's service-account tokens.
	tokens map[tokenKey]*cachedToken
	// reported holds, by volume, the failure Run last recorded an event
	// for, so a failure that persists is reported once.
	reported map[string]string
	// over holds the emptyDirs reported over their sizeLimit.
	over map[string]bool

	// The fields below are guarded by Manager.mu.
	//
	// ready maps the name of each volume that was set up to its host
	// path. A volume once ready stays ready: a failed refresh keeps its
	// last content.
	ready map[string]string
	// due is the earliest refresh of one of the pod's tokens (zero: none).
	due time.Time
}

// SetUp prepares every volume of pod that the manager handles (hostPath
// volumes are the runtime's) and brings those already prepared up to date
// with their sources: the runtime calls it in its SyncPod, before it
// starts any container, at every sync. It is idempotent: an unchanged
// source writes nothing; a changed one is swapped in atomically.
//
// It returns nil once every volume is ready (HostPath answers for each);
// a *MountError naming those that are not (each also a FailedMount event);
// an *UnsupportedError for a pod with volumes of other types (which
// admission should have refused); ErrContentRemovable when the engine says
// the pod's content may be removed; a plain error for a nil pod or an
// invalid UID or volume name. Called from any goroutine; calls for one pod
// are serialized with each other and with Run's refresh and teardown of
// it. pod is kept (for Run's refreshes) and never modified. ctx bounds the
// reads of objects and tokens.
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod) error {
	if err := validatePod(pod); err != nil {
		return err
	}
	if err := Unsupported(pod); err != nil {
		var u *UnsupportedError
		if errors.As(err, &u) {
			err = u.Without(TypeHostPath)
		}
		if err != nil {
			return err
		}
	}
	for {
		if m.pods.ShouldPodContentBeRemoved(pod.UID) {
			return fmt.Errorf("%w: not setting up the volumes of pod %s", ErrContentRemovable, podName(pod))
		}
		rec := m.record(pod.UID)
		rec.mu.Lock()
		if rec.removed {
			// Torn down since: a new record holds the pod from now on.
			rec.mu.Unlock()
			continue
		}
		err := m.syncLocked(ctx, rec, pod, false)
		rec.mu.Unlock()
		select {
		case m.wake <- struct{}{}:
		default:
		}
		return err
	}
}

// record returns the record of uid, making it if there is none.
func (m *Manager) record(uid types.UID) *podRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[uid]
	if !ok {
		rec = &podRecord{
			uid:      uid,
			dir:      filepath.Join(m.root, string(uid)),
			written:  map[string]*writeState{},
			tokens:   map[tokenKey]*cachedToken{},
			reported: map[string]string{},
			over:     map[string]bool{},
			ready:    map[string]string{},
		}
		m.recs[uid] = rec
	}
	return rec
}

// syncLocked prepares or refreshes every volume of pod. fromRun says Run
// refreshes: a failure is then recorded as an event only when it differs
// from the one reported before. rec.mu must be held.
func (m *Manager) syncLocked(ctx context.Context, rec *podRecord, pod *v1.Pod, fromRun bool) error {
	rec.pod = pod
	own := newOwnership(pod, m.opts.MapIDs)
	root, rootErr := own.host(nil)
	if rootErr == nil {
		if _, err := makeDir(rec.dir); err != nil {
			rootErr = err
		}
	}
	var failed []VolumeError
	ready := map[string]string{}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.HostPath != nil {
			continue
		}
		dir := filepath.Join(rec.dir, v.Name)
		err := rootErr
		if err == nil {
			err = m.syncVolumeLocked(ctx, rec, pod, v, dir, own, root)
		}
		if err != nil {
			failed = append(failed, VolumeError{Name: v.Name, Err: err})
			continue
		}
		ready[v.Name] = dir
		delete(rec.reported, v.Name)
	}
	var due time.Time
	for _, t := range rec.tokens {
		if due.IsZero() || t.refreshAt.Before(due) {
			due = t.refreshAt
		}
	}
	m.mu.Lock()
	for name, dir := range ready {
		rec.ready[name] = dir
	}
	rec.due = due
	m.mu.Unlock()
	if len(failed) == 0 {
		return nil
	}
	for _, f := range failed {
		msg := f.Err.Error()
		if fromRun && rec.reported[f.Name] == msg {
			continue
		}
		rec.reported[f.Name] = msg
		m.recorder.Eventf(pod, v1.EventTypeWarning, ReasonFailedMount, "MountVolume.SetUp failed for volume %q : %s", f.Name, msg)
	}
	return &MountError{Pod: podName(pod), Volumes: failed}
}

// syncVolumeLocked prepares or refreshes one volume. rec.mu must be held.
func (m *Manager) syncVolumeLocked(ctx context.Context, rec *podRecord, pod *v1.Pod, v *v1.Volume, dir string, own ownership, root owner) error {
	s := &v.VolumeSource
	var (
		p      payload
		memory bool
		err    error
	)
	switch {
	case s.EmptyDir != nil:
		return m.setUpEmptyDirLocked(pod, v, dir, own, root)
	case s.ConfigMap != nil:
		p, err = m.configMapPayload(ctx, pod, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.DefaultMode, s.ConfigMap.DefaultUser, s.ConfigMap.Optional)
	case s.Secret != nil:
		memory = true
		p, err = m.secretPayload(ctx, pod, s.Secret.SecretName, s.Secret.Items, s.Secret.DefaultMode, s.Secret.DefaultUser, s.Secret.Optional)
	case s.DownwardAPI != nil:
		p, err = downwardPayload(s.DownwardAPI.Items, pod, m.nodeAllocatable(), s.DownwardAPI.DefaultMode, s.DownwardAPI.DefaultUser)
	case s.Projected != nil:
		memory = true
		p, err = m.projectedPayloadLocked(ctx, rec, pod, v.Name, s.Projected, own)
	default:
		return fmt.Errorf("volume %q: no source this manager prepares", v.Name)
	}
	if err != nil {
		return err
	}
	return m.writeLocked(rec, v.Name, dir, p, memory, own, root)
}

// projectedPayloadLocked returns the files of a projected volume: each
// source's, a later source's file winning over an earlier one's at the
// same path. Every source's error is reported, joined.
func (m *Manager) projectedPayloadLocked(ctx context.Context, rec *podRecord, pod *v1.Pod, volume string, src *v1.ProjectedVolumeSource, own ownership) (payload, error) {
	dm := modeOr(src.DefaultMode, defaultMode)
	out := payload{}
	var errs []error
	for _, s := range src.Sources {
		var (
			p   payload
			err error
		)
		switch {
		case s.ConfigMap != nil:
			p, err = m.configMapPayload(ctx, pod, s.ConfigMap.Name, s.ConfigMap.Items, &dm, src.DefaultUser, s.ConfigMap.Optional)
		case s.Secret != nil:
			p, err = m.secretPayload(ctx, pod, s.Secret.Name, s.Secret.Items, &dm, src.DefaultUser, s.Secret.Optional)
		case s.DownwardAPI != nil:
			p, err = downwardPayload(s.DownwardAPI.Items, pod, m.nodeAllocatable(), &dm, src.DefaultUser)
		case s.ServiceAccountToken != nil:
			tp := s.ServiceAccountToken
			var token string
			if token, err = m.tokenLocked(ctx, rec, pod, volume, tp); err == nil {
				user := userOr(tp.User, userOr(src.DefaultUser, own.fsUser))
				p = payload{tp.Path: {data: []byte(token), mode: own.tokenMode(user, dm), user: user}}
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.merge(p)
	}
	return out, errors.Join(errs...)
}

// configMapPayload reads a config map and returns its files.
func (m *Manager) configMapPayload(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, mode *int32, user *int64, optionalp *bool) (payload, error) {
	optional := optionalp != nil && *optionalp
	var get apiobject.ConfigMapFunc
	if m.objects != nil {
		get = m.objects.GetConfigMap
	}
	cm, err := apiobject.ConfigMap(ctx, get, pod.Namespace, name)
	if err != nil {
		return m.readError(err, optional && get != nil, pod)
	}
	return keyPayload("configmap", items, configMapData(cm), mode, user, optional)
}

// secretPayload reads a secret and returns its files.
func (m *Manager) secretPayload(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, mode *int32, user *int64, optionalp *bool) (payload, error) {
	optional := optionalp != nil && *optionalp
	var get apiobject.SecretFunc
	if m.objects != nil {
		get = m.objects.GetSecret
	}
	s, err := apiobject.Secret(ctx, get, pod.Namespace, name)
	if err != nil {
		return m.readError(err, optional && get != nil, pod)
	}
	return keyPayload("secret", items, s.Data, mode, user, optional)
}

// readError turns the error of a read into a volume's: an optional object
// that does not exist is an empty payload. A getter's panic is logged with
// its stack.
func (m *Manager) readError(err error, optional bool, pod *v1.Pod) (payload, error) {
	if apierrors.IsNotFound(err) && optional {
		return payload{}, nil
	}
	m.logPanic(err, pod)
	return nil, err
}

// logPanic logs a getter's panic with its stack.
func (m *Manager) logPanic(err error, pod *v1.Pod) {
	var p *apiobject.PanicError
	if errors.As(err, &p) {
		m.logger.Error(err, "An object getter panicked", "pod", podName(pod), "stack", string(p.Stack))
	}
}

// writeLocked writes a volume's files atomically into dir, within the
// manager's bounds, on a tmpfs when memory. rec.mu must be held.
func (m *Manager) writeLocked(rec *podRecord, name, dir string, p payload, memory bool, own ownership, root owner) error {
	p, err := p.clean()
	if err != nil {
		return err
	}
	if len(p) > m.opts.MaxVolumeFiles {
		return fmt.Errorf("the volume would hold %d files, more than this node's limit of %d", len(p), m.opts.MaxVolumeFiles)
	}
	total := 0
	for _, f := range p {
		total += len(f.data)
	}
	if total > m.opts.MaxVolumeBytes {
		return fmt.Errorf("the volume would hold %d bytes, more than this node's limit of %d", total, m.opts.MaxVolumeBytes)
	}
	if _, err := makeDir(dir); err != nil {
		return err
	}
	if memory {
		// Room for three versions during an update (the previous one stays
		// until the next), and the names.
		if _, err := m.ensureTmpfs(dir, 3*int64(m.opts.MaxVolumeBytes)+1<<20); err != nil {
			return err
		}
	}
	if err := setDir(dir, root, own.dirMode()); err != nil {
		return err
	}
	owners := map[int64]owner{}
	files := make(map[string]hostFile, len(p))
	for path, f := range p {
		key := int64(-1)
		if f.user != nil {
			key = *f.user
		}
		o, ok := owners[key]
		if !ok {
			if o, err = own.host(f.user); err != nil {
				return err
			}
			owners[key] = o
		}
		files[path] = hostFile{data: f.data, mode: own.fileMode(f.mode), owner: o}
	}
	state, changed, err := writeAtomic(dir, files, root, own.dirMode(), m.clock.Now(), rec.written[name])
	if state != nil {
		rec.written[name] = state
	}
	if changed && err == nil {
		m.logger.V(4).Info("Volume written", "pod", podName(rec.pod), "volume", name, "files", len(files))
	}
	return err
}

// nodeAllocatable returns the node's allocatable, or nil.
func (m *Manager) nodeAllocatable() (out v1.ResourceList) {
	if m.opts.NodeAllocatable == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			m.logger.Error(fmt.Errorf("%v", r), "Options.NodeAllocatable panicked")
			out = nil
		}
	}()
	return m.opts.NodeAllocatable()
}

// HostPath returns the host path of the volume volumeName of the pod uid,
// for the runtime to mount (a bind mount, a CRI Mount's host_path): a
// directory holding the volume's files. It is ErrNotSetUp (wrapped) until
// a SetUp prepared the volume; a volume once prepared keeps its path until
// it is torn down. Called from any goroutine.
func (m *Manager) HostPath(uid types.UID, volumeName string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec, ok := m.recs[uid]; ok {
		if p, ok := rec.ready[volumeName]; ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: volume %q of pod %s", ErrNotSetUp, volumeName, uid)
}

// TearDown removes every volume of the pod uid (unmounting its memory
// volumes first) and forgets the pod, when the engine says its content may
// be removed; otherwise it does nothing and returns false (Run removes it
// once it may). The runtime may call it from SyncTerminatedPod, to have a
// deleted pod's volumes gone as soon as they may go; Run calls it too.
// Called from any goroutine; serialized with the pod's SetUp. An error
// (an unmount or a removal that failed) leaves what remains for a later
// call.
func (m *Manager) TearDown(uid types.UID) (bool, error) {
	if err := validateUID(uid); err != nil {
		return false, err
	}
	if !m.pods.ShouldPodContentBeRemoved(uid) {
		return false, nil
	}
	m.mu.Lock()
	rec := m.recs[uid]
	m.mu.Unlock()
	if rec != nil {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.removed {
			return true, nil
		}
	}
	if err := m.removePodDir(filepath.Join(m.root, string(uid))); err != nil {
		return false, fmt.Errorf("volume: tearing down the volumes of pod %s: %w", uid, err)
	}
	if rec != nil {
		rec.removed = true
		m.mu.Lock()
		if m.recs[uid] == rec {
			delete(m.recs, uid)
		}
		m.mu.Unlock()
	}
	m.logger.V(2).Info("Pod's volumes torn down", "podUID", uid)
	return true, nil
}

// removePodDir unmounts what is mounted on the volumes of a pod's
// directory and removes it.
func (m *Manager) removePodDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		vol := filepath.Join(dir, e.Name())
		mounted, err := m.opts.Tmpfs.IsMountPoint(vol)
		if err != nil {
			return err
		}
		if mounted {
			if err := m.opts.Tmpfs.Unmount(vol); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(dir)
}

// sortedUIDs returns the UIDs of recs, sorted.
func sortedUIDs(recs map[types.UID]*podRecord) []types.UID {
	out := make([]types.UID, 0, len(recs))
	for uid := range recs {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
