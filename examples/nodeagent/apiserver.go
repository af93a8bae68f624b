package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
)

// fakeAPIServer stands in for an API server: it holds the demo's API pods
// and the mirror pods the agent creates, and sends the pods bound to the
// node to a config sink under mirror.ApiserverSource whenever they change,
// the way a watch of the real API server would. Mirror pods are made by a
// mirror.Client, as against a real API server, over the fake's pods: each
// gets a UID of its own when created, and a delete honours its UID
// precondition. Nothing else is kept: a mirror pod deleted is forgotten.
//
// It is the agent's mirror.MirrorPodClient. Its methods are safe for
// concurrent use.
type fakeAPIServer struct {
	client   *mirror.Client
	onChange func()
	say      func(format string, args ...any)

	mu   sync.Mutex
	pods map[string]*v1.Pod // API pods by name
	// mirrors are the mirror pods, by full name.
	mirrors map[string]*v1.Pod
	// wake has a value when a change is not yet published.
	wake chan struct{}
}

var (
	_ mirror.MirrorPodClient = (*fakeAPIServer)(nil)
	_ podconfig.Source       = (*fakeAPIServer)(nil)
)

// newFakeAPIServer returns an API server of node nodeName with no pods.
// onChange, when not nil, is called after every change (it must not
// block); say, when not nil, is told of mirror pods created and deleted.
// It fails only when nodeName is unusable as a mirror client's node.
func newFakeAPIServer(nodeName string, onChange func(), say func(format string, args ...any)) (*fakeAPIServer, error) {
	if say == nil {
		say = func(string, ...any) {}
	}
	s := &fakeAPIServer{
		onChange: onChange,
		say:      say,
		pods:     map[string]*v1.Pod{},
		mirrors:  map[string]*v1.Pod{},
		wake:     make(chan struct{}, 1),
	}
	nodeUID := types.UID("node-" + nodeName)
	client, err := mirror.NewClient(mirror.PodAPIFuncs{CreateFunc: s.createMirror, GetFunc: s.getMirror, DeleteFunc: s.deleteMirror}, mirror.ClientOptions{
		NodeName: nodeName,
		NodeUID:  func(context.Context) (types.UID, error) { return nodeUID, nil },
	})
	if err != nil {
		return nil, err
	}
	s.client = client
	s.changed()
	return s, nil
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

// CreateMirrorPod creates the mirror pod of a static pod (mirror.Client).
func (s *fakeAPIServer) CreateMirrorPod(ctx context.Context, pod *v1.Pod) error {
	return s.client.CreateMirrorPod(ctx, pod)
}

// DeleteMirrorPod deletes the mirror pod of that full name (mirror.Client).
func (s *fakeAPIServer) DeleteMirrorPod(ctx context.Context, podFullName string, uid *types.UID) (bool, error) {
	return s.client.DeleteMirrorPod(ctx, podFullName, uid)
}

// MirrorPod returns the mirror pod of the static pod with that full name.
func (s *fakeAPIServer) MirrorPod(fullName string) (*v1.Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.mirrors[fullName]
	if !ok {
		return nil, false
	}
	return m.DeepCopy(), true
}

// mirrorPodNames returns the full names of the mirror pods, sorted.
func (s *fakeAPIServer) mirrorPodNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.mirrors))
	for n := range s.mirrors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// createMirror, getMirror and deleteMirror are the pod API the mirror
// client calls, answering as an API server does for mirror pods.
func (s *fakeAPIServer) createMirror(_ context.Context, namespace string, pod *v1.Pod, _ metav1.CreateOptions) (*v1.Pod, error) {
	fullName := mirror.BuildPodFullName(pod.Name, namespace)
	s.mu.Lock()
	if _, ok := s.mirrors[fullName]; ok {
		s.mu.Unlock()
		return &v1.Pod{}, apierrors.NewAlreadyExists(v1.Resource("pods"), pod.Name)
	}
	m := pod.DeepCopy()
	m.Namespace, m.UID, m.ResourceVersion = namespace, newUID(), "1"
	m.CreationTimestamp = metav1.Now()
	s.mirrors[fullName] = m
	s.mu.Unlock()
	s.say("api server: created the mirror pod of static pod %s/%s", namespace, pod.Name)
	s.changed()
	return m.DeepCopy(), nil
}

func (s *fakeAPIServer) getMirror(_ context.Context, namespace, name string, _ metav1.GetOptions) (*v1.Pod, error) {
	if m, ok := s.MirrorPod(mirror.BuildPodFullName(name, namespace)); ok {
		return m, nil
	}
	return &v1.Pod{}, apierrors.NewNotFound(v1.Resource("pods"), name)
}

func (s *fakeAPIServer) deleteMirror(_ context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	fullName := mirror.BuildPodFullName(name, namespace)
	s.mu.Lock()
	m, ok := s.mirrors[fullName]
	switch {
	case !ok:
		s.mu.Unlock()
		return apierrors.NewNotFound(v1.Resource("pods"), name)
	case opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != m.UID:
		s.mu.Unlock()
		return apierrors.NewConflict(v1.Resource("pods"), name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s)", *opts.Preconditions.UID, m.UID))
	}
	delete(s.mirrors, fullName)
	s.mu.Unlock()
	s.say("api server: deleted mirror pod %s", fullName)
	s.changed()
	return nil
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
	for _, fn := range s.mirrorPodNames() {
		if m, ok := s.MirrorPod(fn); ok {
			out = append(out, m)
		}
	}
	return out
}

// Source is the name the fake's snapshots go under, the API server's; with
// Run it makes the fake a podconfig.Source.
func (s *fakeAPIServer) Source() string { return mirror.ApiserverSource }

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
