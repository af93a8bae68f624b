package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/mirror/mirrortest"
)

// fakeAPIServer stands in for an API server: it holds the demo's API pods
// and the mirror pods the agent creates, and sends the pods bound to the
// node to a config sink under mirror.ApiserverSource whenever they change,
// the way a watch of the real API server would. Mirror pods are kept by a
// mirrortest.FakeClient, which applies mirror.Client's rules, and get a UID
// of their own when created, as the API server gives them.
//
// It is the agent's mirror.MirrorPodClient. Its methods are safe for
// concurrent use.
type fakeAPIServer struct {
	mirrors  *mirrortest.FakeClient
	onChange func()
	say      func(format string, args ...any)

	mu   sync.Mutex
	pods map[string]*v1.Pod // API pods by name
	// mirrorUIDs are the UIDs given to mirror pods, by full name.
	mirrorUIDs map[string]types.UID
	// wake has a value when a change is not yet published.
	wake chan struct{}
}

var _ mirror.MirrorPodClient = (*fakeAPIServer)(nil)

// newFakeAPIServer returns an API server with no pods. onChange, when not
// nil, is called after every change (it must not block); say, when not
// nil, is told of mirror pods created and deleted.
func newFakeAPIServer(onChange func(), say func(format string, args ...any)) *fakeAPIServer {
	if say == nil {
		say = func(string, ...any) {}
	}
	s := &fakeAPIServer{
		mirrors:    mirrortest.NewFakeClient(),
		onChange:   onChange,
		say:        say,
		pods:       map[string]*v1.Pod{},
		mirrorUIDs: map[string]types.UID{},
		wake:       make(chan struct{}, 1),
	}
	s.changed()
	return s
}

func newUID() types.UID {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return types.UID(h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:])
}

func (s *fakeAPIServer) changed() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if s.onChange != nil {
		s.onChange()
	}
}

// Create adds API pods, giving each a new UID and a creation time (in the
// given order), as the API server does on create.
func (s *fakeAPIServer) Create(pods ...*v1.Pod) {
	s.mu.Lock()
	for i, p := range pods {
		p = p.DeepCopy()
		p.UID = newUID()
		p.CreationTimestamp = metav1.Unix(metav1.Now().Unix(), int64(i))
		s.pods[p.Name] = p
	}
	s.mu.Unlock()
	s.changed()
}

// Delete starts a graceful deletion of the API pod name, as kubectl delete
// does: the pod stays, with a deletion timestamp and grace period, until
// Remove. It reports whether the pod exists.
func (s *fakeAPIServer) Delete(name string, grace int64) bool {
	s.mu.Lock()
	p, ok := s.pods[name]
	if ok {
		p = p.DeepCopy()
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.DeletionGracePeriodSeconds = &grace
		s.pods[name] = p
	}
	s.mu.Unlock()
	if ok {
		s.changed()
	}
	return ok
}

// Remove removes the API pod name (the end of its deletion).
func (s *fakeAPIServer) Remove(name string) {
	s.mu.Lock()
	delete(s.pods, name)
	s.mu.Unlock()
	s.changed()
}

// Pod returns the API pod name.
func (s *fakeAPIServer) Pod(name string) (*v1.Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[name]
	if !ok {
		return nil, false
	}
	return p.DeepCopy(), true
}

// CreateMirrorPod creates the mirror pod of a static pod.
func (s *fakeAPIServer) CreateMirrorPod(ctx context.Context, pod *v1.Pod) error {
	if err := s.mirrors.CreateMirrorPod(ctx, pod); err != nil {
		return err
	}
	s.mu.Lock()
	_, existed := s.mirrorUIDs[mirror.PodFullName(pod)]
	if !existed {
		s.mirrorUIDs[mirror.PodFullName(pod)] = newUID()
	}
	s.mu.Unlock()
	if !existed {
		s.say("api server: created the mirror pod of static pod %s/%s", pod.Namespace, pod.Name)
	}
	s.changed()
	return nil
}

// DeleteMirrorPod deletes the mirror pod of that full name.
func (s *fakeAPIServer) DeleteMirrorPod(ctx context.Context, podFullName string, uid *types.UID) (bool, error) {
	deleted, err := s.mirrors.DeleteMirrorPod(ctx, podFullName, uid)
	if deleted {
		s.mu.Lock()
		delete(s.mirrorUIDs, podFullName)
		s.mu.Unlock()
		s.say("api server: deleted mirror pod %s", podFullName)
		s.changed()
	}
	return deleted, err
}

// MirrorPod returns the mirror pod of the static pod with that full name.
func (s *fakeAPIServer) MirrorPod(fullName string) (*v1.Pod, bool) {
	m, ok := s.mirrors.MirrorPod(fullName)
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	m.UID = s.mirrorUIDs[fullName]
	s.mu.Unlock()
	return m, true
}

// snapshot returns every pod the API server has for the node: API pods by
// name, then mirror pods by full name.
func (s *fakeAPIServer) snapshot() []*v1.Pod {
	s.mu.Lock()
	names := make([]string, 0, len(s.pods))
	for n := range s.pods {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*v1.Pod, 0, len(names))
	for _, n := range names {
		out = append(out, s.pods[n].DeepCopy())
	}
	s.mu.Unlock()
	for _, fn := range s.mirrors.MirrorPodNames() {
		if m, ok := s.MirrorPod(fn); ok {
			out = append(out, m)
		}
	}
	return out
}

// Run publishes a snapshot to sink at once and after every change, until
// ctx ends. It returns nil then, or the sink's error.
func (s *fakeAPIServer) Run(ctx context.Context, sink podconfig.PodSink) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		}
		if err := sink.SetPods(ctx, mirror.ApiserverSource, s.snapshot()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}
