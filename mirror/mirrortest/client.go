package mirrortest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
)

// DeleteCall is one recorded FakeClient.DeleteMirrorPod call.
type DeleteCall struct {
	// FullName is the podFullName argument.
	FullName string
	// UID is a copy of the uid argument; nil when none was given.
	UID *types.UID
}

// FakeClient is an in-memory mirror.MirrorPodClient. It keeps the mirror pods
// it has created by full name, records every call, and can be told to fail.
//
// It refuses what mirror.Client refuses — a pod that fails
// mirror.ValidateStaticPod, a malformed full name, a create over a mirror
// with another hash (mirror.ErrHashMismatch) — so code tested against it
// behaves the same against the real client. Like the API server it gives
// each mirror it stores a UID of its own ("mirror-1", "mirror-2", ...), so
// mirrors fed back into a pod store never collide with their static pod,
// and a delete with a uid that is not the stored mirror's deletes nothing
// (a failed precondition, reported as (false, nil) like mirror.Client).
//
// The zero value is ready to use. Safe for concurrent use.
type FakeClient struct {
	mu sync.Mutex
	// mirrors holds the mirror pods that exist, by full name: copies of
	// the static pods with the mirror annotation set.
	mirrors   map[string]*v1.Pod
	creates   []*v1.Pod
	deletes   []DeleteCall
	createErr error
	deleteErr error
	// created counts the mirrors stored, to make their UIDs.
	created int
}

var _ mirror.MirrorPodClient = (*FakeClient)(nil)

// NewFakeClient returns an empty FakeClient; the same as new(FakeClient).
func NewFakeClient() *FakeClient { return &FakeClient{} }

// CreateMirrorPod records a copy of pod, then fails with the error set by
// SetCreateError if any, else applies the rules of mirror.Client: it refuses
// a pod that is not static, succeeds if a mirror with the same hash exists,
// fails with mirror.ErrHashMismatch if one with another hash exists, and
// otherwise stores a copy of pod carrying the mirror annotation.
func (f *FakeClient) CreateMirrorPod(_ context.Context, pod *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var recorded *v1.Pod
	if pod != nil {
		recorded = pod.DeepCopy()
	}
	f.creates = append(f.creates, recorded)
	if f.createErr != nil {
		return f.createErr
	}
	if err := mirror.ValidateStaticPod(pod); err != nil {
		return err
	}
	fullName := mirror.PodFullName(pod)
	hash := pod.Annotations[mirror.ConfigHashAnnotationKey]
	if existing, ok := f.mirrors[fullName]; ok {
		if existingHash := existing.Annotations[mirror.ConfigMirrorAnnotationKey]; existingHash != hash {
			return fmt.Errorf("%w: creating mirror pod %s: the existing mirror has hash %q, the static pod has hash %q",
				mirror.ErrHashMismatch, fullName, existingHash, hash)
		}
		return nil
	}
	m := pod.DeepCopy()
	m.Annotations[mirror.ConfigMirrorAnnotationKey] = hash
	f.created++
	m.UID = types.UID(fmt.Sprintf("mirror-%d", f.created))
	m.ResourceVersion = ""
	if f.mirrors == nil {
		f.mirrors = make(map[string]*v1.Pod)
	}
	f.mirrors[fullName] = m
	return nil
}

// DeleteMirrorPod records the call, then fails with the error set by
// SetDeleteError if any, else fails for a malformed full name (as
// mirror.ParsePodFullName), else removes the mirror of that full name and
// reports whether there was one.
func (f *FakeClient) DeleteMirrorPod(_ context.Context, podFullName string, uid *types.UID) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := DeleteCall{FullName: podFullName}
	if uid != nil {
		u := *uid
		call.UID = &u
	}
	f.deletes = append(f.deletes, call)
	if f.deleteErr != nil {
		return false, f.deleteErr
	}
	if _, _, err := mirror.ParsePodFullName(podFullName); err != nil {
		return false, err
	}
	existing, ok := f.mirrors[podFullName]
	if !ok || (uid != nil && existing.UID != *uid) {
		return false, nil
	}
	delete(f.mirrors, podFullName)
	return true, nil
}

// SetCreateError makes every later CreateMirrorPod fail with err (nil
// restores normal behaviour).
func (f *FakeClient) SetCreateError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.createErr = err
}

// SetDeleteError makes every later DeleteMirrorPod fail with err and delete
// nothing (nil restores normal behaviour).
func (f *FakeClient) SetDeleteError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteErr = err
}

// AddMirrorPod stores a copy of mirrorPod as an existing mirror, keyed by its
// full name, without recording a call: for setting up a test. A nil pod is
// ignored.
func (f *FakeClient) AddMirrorPod(mirrorPod *v1.Pod) {
	if mirrorPod == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mirrors == nil {
		f.mirrors = make(map[string]*v1.Pod)
	}
	f.mirrors[mirror.PodFullName(mirrorPod)] = mirrorPod.DeepCopy()
}

// Creates returns copies of the pods passed to CreateMirrorPod, oldest first,
// including calls that failed (a nil pod is recorded as nil). The slice is
// the caller's.
func (f *FakeClient) Creates() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*v1.Pod, len(f.creates))
	for i, p := range f.creates {
		if p != nil {
			out[i] = p.DeepCopy()
		}
	}
	return out
}

// Deletes returns the DeleteMirrorPod calls, oldest first, including calls
// that failed. The slice is the caller's.
func (f *FakeClient) Deletes() []DeleteCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]DeleteCall, len(f.deletes))
	for i, d := range f.deletes {
		out[i] = d
		if d.UID != nil {
			u := *d.UID
			out[i].UID = &u
		}
	}
	return out
}

// MirrorPod returns a copy of the mirror stored under fullName.
func (f *FakeClient) MirrorPod(fullName string) (*v1.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.mirrors[fullName]
	if !ok {
		return nil, false
	}
	return m.DeepCopy(), true
}

// MirrorPodNames returns the full names of the mirrors that exist, sorted.
func (f *FakeClient) MirrorPodNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.mirrors))
	for n := range f.mirrors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
