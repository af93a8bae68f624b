package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/mirror/mirrortest"
)

const (
	testNode    = "node-a"
	testNodeUID = types.UID("node-uid-1")
)

func nodeUIDIs(uid types.UID, err error) func(context.Context) (types.UID, error) {
	return func(context.Context) (types.UID, error) { return uid, err }
}

// staticPod returns a static pod as PrepareStaticPod leaves it.
func staticPod(name, hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: "kube-system",
			UID:       types.UID(hash),
			Annotations: map[string]string{
				mirror.ConfigSourceAnnotationKey: mirror.FileSource,
				mirror.ConfigHashAnnotationKey:   hash,
			},
		},
		Spec: v1.PodSpec{NodeName: testNode},
	}
}

// mirrorPodIn returns a mirror pod as the API server would hold it.
func mirrorPodIn(name string, uid types.UID, hash string) *v1.Pod {
	p := staticPod(name, hash)
	p.UID = uid
	p.Annotations[mirror.ConfigMirrorAnnotationKey] = hash
	return p
}

func regularPod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: uid}}
}

func verbs(calls []mirrortest.Call) []mirrortest.Verb {
	out := make([]mirrortest.Verb, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.Verb)
	}
	return out
}

// newClient is NewClient for the options every test but the constructor's
// gives.
func newClient(t *testing.T, api mirror.PodAPI, nodeName string, nodeUID func(context.Context) (types.UID, error)) *mirror.Client {
	t.Helper()
	client, err := mirror.NewClient(api, mirror.ClientOptions{NodeName: nodeName, NodeUID: nodeUID})
	require.NoError(t, err)
	return client
}

func TestNewClientValidates(t *testing.T) {
	api := mirrortest.NewFakePodAPI()
	for name, tc := range map[string]struct {
		opts    mirror.ClientOptions
		wantErr string
	}{
		"no node name":         {mirror.ClientOptions{NodeUID: nodeUIDIs(testNodeUID, nil)}, "NodeName is empty"},
		"no node UID function": {mirror.ClientOptions{NodeName: testNode}, "NodeUID is nil"},
	} {
		t.Run(name, func(t *testing.T) {
			client, err := mirror.NewClient(api, tc.opts)
			require.ErrorContains(t, err, tc.wantErr)
			assert.True(t, strings.HasPrefix(err.Error(), "mirror: "), err.Error())
			assert.Nil(t, client)
		})
	}
	assert.Empty(t, api.Calls(), "nothing is sent")
}

func TestCreateMirrorPod(t *testing.T) {
	tests := []struct {
		name     string
		nodeName string
		nodeUID  func(context.Context) (types.UID, error)
		wantErr  string
	}{
		{"node lookup fails", testNode, nodeUIDIs("", errors.New("node not registered yet")), "node not registered yet"},
		{"node has no UID", testNode, nodeUIDIs("", nil), "has no UID"},
		{"success", testNode, nodeUIDIs(testNodeUID, nil), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := mirrortest.NewFakePodAPI()
			client := newClient(t, api, tc.nodeName, tc.nodeUID)
			pod := staticPod("etcd-node-a", "hash-1")
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "cm"}}
			pod.ResourceVersion = "42"
			before := pod.DeepCopy()

			err := client.CreateMirrorPod(context.Background(), pod)
			assert.Equal(t, before, pod, "the static pod is not modified")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.True(t, strings.HasPrefix(err.Error(), "mirror: "), err.Error())
				assert.Empty(t, api.Calls(), "nothing is sent without an owner reference")
				return
			}
			require.NoError(t, err)

			created, ok := api.Pod("kube-system", "etcd-node-a")
			require.True(t, ok)
			assert.Equal(t, "hash-1", created.Annotations[mirror.ConfigMirrorAnnotationKey])
			assert.Equal(t, "hash-1", created.Annotations[mirror.ConfigHashAnnotationKey])
			assert.Equal(t, []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       testNode,
				UID:        testNodeUID,
				Controller: ptr.To(true),
			}}, created.OwnerReferences, "exactly one controller reference, to the Node")
			assert.True(t, mirror.IsMirrorPod(created))
			assert.True(t, mirror.IsMirrorPodOf(created, pod))

			sent := api.Calls()[0].Pod
			assert.Empty(t, sent.UID, "the API server assigns the UID")
			assert.Empty(t, sent.ResourceVersion, "a create must not carry a resourceVersion")
		})
	}
}

func TestCreateMirrorPodRefusesPodsThatAreNotStatic(t *testing.T) {
	noHash := staticPod("etcd-node-a", "h")
	delete(noHash.Annotations, mirror.ConfigHashAnnotationKey)
	apiPod := staticPod("web", "h")
	apiPod.Annotations[mirror.ConfigSourceAnnotationKey] = mirror.ApiserverSource
	noSource := staticPod("web", "h")
	delete(noSource.Annotations, mirror.ConfigSourceAnnotationKey)

	tests := []struct {
		name string
		pod  *v1.Pod
	}{
		{"nil pod", nil},
		{"pod from the API server", apiPod},
		{"pod without a source", noSource},
		{"a mirror pod", mirrorPodIn("etcd-node-a", "m", "h")},
		{"static pod without a hash", noHash},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := mirrortest.NewFakePodAPI()
			client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))
			err := client.CreateMirrorPod(context.Background(), tc.pod)
			require.ErrorIs(t, err, mirror.ErrNotStaticPod)
			assert.Empty(t, api.Calls())
			assert.Empty(t, api.Pods())
		})
	}
}

// D5: the kubelet reports every AlreadyExists as a failure because it looks at
// the empty object a failed create returns; podkit reads the existing object.
func TestCreateMirrorPodD5AlreadyExists(t *testing.T) {
	tests := []struct {
		name      string
		existing  *v1.Pod
		getErr    error
		wantIs    error
		wantInErr []string
	}{
		{name: "same hash is success", existing: mirrorPodIn("etcd-node-a", "m1", "hash-1")},
		{name: "other hash is an error naming both", existing: mirrorPodIn("etcd-node-a", "m1", "hash-0"),
			wantIs: mirror.ErrHashMismatch, wantInErr: []string{`"hash-0"`, `"hash-1"`, "m1"}},
		{name: "a pod that is not a mirror is an error", existing: regularPod("etcd-node-a", "r1"),
			wantIs: mirror.ErrNotMirrorPod},
		{name: "the existing pod cannot be read", existing: mirrorPodIn("etcd-node-a", "m1", "hash-1"),
			getErr: apierrors.NewServiceUnavailable("etcd is down"), wantInErr: []string{"etcd is down"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := mirrortest.NewFakePodAPI(tc.existing)
			if tc.getErr != nil {
				api.InjectError(mirrortest.VerbGet, tc.getErr)
			}
			client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))

			err := client.CreateMirrorPod(context.Background(), staticPod("etcd-node-a", "hash-1"))
			assert.Equal(t, []mirrortest.Verb{mirrortest.VerbCreate, mirrortest.VerbGet}, verbs(api.Calls()))
			stored, _ := api.Pod("kube-system", "etcd-node-a")
			assert.Equal(t, tc.existing.UID, stored.UID, "the existing object is never replaced")
			if tc.wantIs == nil && tc.wantInErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tc.wantIs != nil {
				assert.ErrorIs(t, err, tc.wantIs)
			}
			for _, s := range tc.wantInErr {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestCreateMirrorPodReturnsAPIErrors(t *testing.T) {
	api := mirrortest.NewFakePodAPI()
	api.InjectError(mirrortest.VerbCreate, apierrors.NewForbidden(v1.Resource("pods"), "etcd-node-a", errors.New("no")))
	client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))

	err := client.CreateMirrorPod(context.Background(), staticPod("etcd-node-a", "hash-1"))
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "the API error stays recognisable: %v", err)
	assert.Equal(t, []mirrortest.Verb{mirrortest.VerbCreate}, verbs(api.Calls()))
}

func TestDeleteMirrorPod(t *testing.T) {
	const fullName = "etcd-node-a_kube-system"
	tests := []struct {
		name        string
		existing    *v1.Pod
		fullName    string
		uid         *types.UID
		inject      map[mirrortest.Verb]error
		wantDeleted bool
		wantErrIs   error  // when set, an error wrapping it
		wantErr     string // when set, an error containing it
		wantVerbs   []mirrortest.Verb
		wantGone    bool
	}{
		{
			name: "deletes a mirror by name", existing: mirrorPodIn("etcd-node-a", "m1", "h"), fullName: fullName,
			wantDeleted: true, wantGone: true, wantVerbs: []mirrortest.Verb{"get", "delete"},
		},
		{
			name: "deletes a mirror with the given UID", existing: mirrorPodIn("etcd-node-a", "m1", "h"), fullName: fullName,
			uid: ptr.To(types.UID("m1")), wantDeleted: true, wantGone: true, wantVerbs: []mirrortest.Verb{"get", "delete"},
		},
		{
			name: "another UID is not deleted, without error", existing: mirrorPodIn("etcd-node-a", "m2", "h"), fullName: fullName,
			uid: ptr.To(types.UID("m1")), wantVerbs: []mirrortest.Verb{"get"},
		},
		{
			name: "a missing pod is not deleted, without error", fullName: fullName,
			wantVerbs: []mirrortest.Verb{"get"}, wantGone: true,
		},
		{
			name: "refuses to delete a pod that is not a mirror", existing: regularPod("etcd-node-a", "r1"), fullName: fullName,
			wantErrIs: mirror.ErrNotMirrorPod, wantVerbs: []mirrortest.Verb{"get"},
		},
		{
			name: "refuses even with its UID given", existing: regularPod("etcd-node-a", "r1"), fullName: fullName,
			uid: ptr.To(types.UID("r1")), wantErrIs: mirror.ErrNotMirrorPod, wantVerbs: []mirrortest.Verb{"get"},
		},
		{
			name: "a malformed full name is an error and calls nothing", existing: mirrorPodIn("etcd-node-a", "m1", "h"),
			fullName: "etcd-node-a", wantErrIs: mirror.ErrInvalidFullName, wantVerbs: []mirrortest.Verb{},
		},
		{
			name: "a Conflict from delete is not deleted, without error", existing: mirrorPodIn("etcd-node-a", "m1", "h"), fullName: fullName,
			inject:    map[mirrortest.Verb]error{"delete": apierrors.NewConflict(v1.Resource("pods"), "etcd-node-a", errors.New("precondition"))},
			wantVerbs: []mirrortest.Verb{"get", "delete"},
		},
		{
			name: "a NotFound from delete is not deleted, without error", existing: mirrorPodIn("etcd-node-a", "m1", "h"), fullName: fullName,
			inject:    map[mirrortest.Verb]error{"delete": apierrors.NewNotFound(v1.Resource("pods"), "etcd-node-a")},
			wantVerbs: []mirrortest.Verb{"get", "delete"},
		},
		{
			name: "another delete error is returned", existing: mirrorPodIn("etcd-node-a", "m1", "h"), fullName: fullName,
			inject:    map[mirrortest.Verb]error{"delete": apierrors.NewInternalError(errors.New("disk full"))},
			wantErr:   "disk full",
			wantVerbs: []mirrortest.Verb{"get", "delete"},
		},
		{
			name: "a Forbidden get with the UID given deletes by that UID", existing: mirrorPodIn("etcd-node-a", "m1", "h"), fullName: fullName,
			uid:         ptr.To(types.UID("m1")),
			inject:      map[mirrortest.Verb]error{"get": apierrors.NewForbidden(v1.Resource("pods"), "etcd-node-a", errors.New("no relationship found"))},
			wantDeleted: true, wantGone: true, wantVerbs: []mirrortest.Verb{"get", "delete"},
		},
		{
			name: "a Forbidden get of a gone mirror with its UID given is not an error", fullName: fullName,
			uid:       ptr.To(types.UID("m1")),
			inject:    map[mirrortest.Verb]error{"get": apierrors.NewForbidden(v1.Resource("pods"), "etcd-node-a", errors.New("no relationship found"))},
			wantGone:  true,
			wantVerbs: []mirrortest.Verb{"get", "delete"},
		},
		{
			name: "a Forbidden get with the UID given never deletes another UID", existing: regularPod("etcd-node-a", "r1"), fullName: fullName,
			uid:       ptr.To(types.UID("m1")),
			inject:    map[mirrortest.Verb]error{"get": apierrors.NewForbidden(v1.Resource("pods"), "etcd-node-a", errors.New("no relationship found"))},
			wantVerbs: []mirrortest.Verb{"get", "delete"},
		},
		{
			name: "a Forbidden get without a UID is returned", existing: mirrorPodIn("etcd-node-a", "m1", "h"), fullName: fullName,
			inject:    map[mirrortest.Verb]error{"get": apierrors.NewForbidden(v1.Resource("pods"), "etcd-node-a", errors.New("no relationship found"))},
			wantErr:   "forbidden",
			wantVerbs: []mirrortest.Verb{"get"},
		},
		{
			name: "a get error is returned", existing: mirrorPodIn("etcd-node-a", "m1", "h"), fullName: fullName,
			inject:    map[mirrortest.Verb]error{"get": apierrors.NewServiceUnavailable("etcd is down")},
			wantErr:   "etcd is down",
			wantVerbs: []mirrortest.Verb{"get"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := mirrortest.NewFakePodAPI(tc.existing)
			for verb, err := range tc.inject {
				api.InjectError(verb, err)
			}
			client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))

			deleted, err := client.DeleteMirrorPod(context.Background(), tc.fullName, tc.uid)
			assert.Equal(t, tc.wantDeleted, deleted)
			switch {
			case tc.wantErrIs != nil:
				require.ErrorIs(t, err, tc.wantErrIs)
				assert.True(t, strings.HasPrefix(err.Error(), "mirror: "), err.Error())
			case tc.wantErr != "":
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.True(t, strings.HasPrefix(err.Error(), "mirror: "), err.Error())
			default:
				require.NoError(t, err)
			}
			calls := api.Calls()
			assert.Equal(t, tc.wantVerbs, verbs(calls))
			_, present := api.Pod("kube-system", "etcd-node-a")
			assert.Equal(t, !tc.wantGone, present)

			for _, c := range calls {
				if c.Verb != mirrortest.VerbDelete {
					continue
				}
				assert.Equal(t, ptr.To(int64(0)), c.DeleteOptions.GracePeriodSeconds, "mirrors are deleted at once")
				require.NotNil(t, c.DeleteOptions.Preconditions)
				want := tc.uid
				if want == nil {
					want = &tc.existing.UID
				}
				assert.Equal(t, want, c.DeleteOptions.Preconditions.UID,
					"the delete is bound to the object that was checked, or to the UID given")
			}
		})
	}
}

// A pod re-created under the mirror's name between the check and the delete
// must survive: the delete carries the checked object's UID.
func TestDeleteMirrorPodNeverDeletesAPodSwappedIn(t *testing.T) {
	api := mirrortest.NewFakePodAPI(mirrorPodIn("etcd-node-a", "m1", "h"))
	api.SetReactor(func(c mirrortest.Call) error {
		if c.Verb == mirrortest.VerbDelete {
			api.Put(regularPod("etcd-node-a", "r1"))
		}
		return nil
	})
	client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))

	deleted, err := client.DeleteMirrorPod(context.Background(), "etcd-node-a_kube-system", nil)
	require.NoError(t, err)
	assert.False(t, deleted)
	survivor, ok := api.Pod("kube-system", "etcd-node-a")
	require.True(t, ok)
	assert.Equal(t, types.UID("r1"), survivor.UID)
}

func TestStandaloneClient(t *testing.T) {
	client, err := mirror.NewClient(nil, mirror.ClientOptions{})
	require.NoError(t, err, "standalone mode needs no node")
	ctx := context.Background()

	require.NoError(t, client.CreateMirrorPod(ctx, staticPod("etcd-node-a", "h")), "without an API server there is nothing to do")
	deleted, err := client.DeleteMirrorPod(ctx, "etcd-node-a_kube-system", nil)
	require.NoError(t, err)
	assert.False(t, deleted)

	assert.ErrorIs(t, client.CreateMirrorPod(ctx, regularPod("web", "u")), mirror.ErrNotStaticPod, "bad input is still refused")
	_, err = client.DeleteMirrorPod(ctx, "no-namespace", nil)
	assert.ErrorIs(t, err, mirror.ErrInvalidFullName)
}

func TestPodAPIFuncs(t *testing.T) {
	ctx := context.Background()
	var empty mirror.PodAPIFuncs
	_, err := empty.Create(ctx, "ns", &v1.Pod{}, metav1.CreateOptions{})
	assert.ErrorContains(t, err, "CreateFunc is nil")
	_, err = empty.Get(ctx, "ns", "p", metav1.GetOptions{})
	assert.ErrorContains(t, err, "GetFunc is nil")
	assert.ErrorContains(t, empty.Delete(ctx, "ns", "p", metav1.DeleteOptions{}), "DeleteFunc is nil")

	// The adapter shape a client-go clientset needs, here over the fake.
	backend := mirrortest.NewFakePodAPI()
	api := mirror.PodAPIFuncs{
		CreateFunc: func(ctx context.Context, ns string, pod *v1.Pod, o metav1.CreateOptions) (*v1.Pod, error) {
			return backend.Create(ctx, ns, pod, o)
		},
		GetFunc: func(ctx context.Context, ns, name string, o metav1.GetOptions) (*v1.Pod, error) {
			return backend.Get(ctx, ns, name, o)
		},
		DeleteFunc: func(ctx context.Context, ns, name string, o metav1.DeleteOptions) error {
			return backend.Delete(ctx, ns, name, o)
		},
	}
	client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))
	require.NoError(t, client.CreateMirrorPod(ctx, staticPod("etcd-node-a", "h")))
	deleted, err := client.DeleteMirrorPod(ctx, "etcd-node-a_kube-system", nil)
	require.NoError(t, err)
	assert.True(t, deleted)
	assert.Empty(t, backend.Pods())
}

func TestClientLogsToTheGivenLogger(t *testing.T) {
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 4})
	client, err := mirror.NewClient(mirrortest.NewFakePodAPI(), mirror.ClientOptions{NodeName: testNode, NodeUID: nodeUIDIs(testNodeUID, nil), Logger: logger})
	require.NoError(t, err)

	require.NoError(t, client.CreateMirrorPod(context.Background(), staticPod("etcd-node-a", "h")))
	_, err = client.DeleteMirrorPod(context.Background(), "etcd-node-a_kube-system", nil)
	require.NoError(t, err)
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], "Creating mirror pod")
	assert.Contains(t, lines[1], "Deleting mirror pod")
}

// The mirror is deleted (say, by housekeeping) between the AlreadyExists and
// the read-back: the name is free again, so the client creates it anew.
func TestCreateMirrorPodCreatesAgainWhenTheExistingPodVanishes(t *testing.T) {
	api := mirrortest.NewFakePodAPI(mirrorPodIn("etcd-node-a", "m1", "hash-0"))
	api.SetReactor(func(c mirrortest.Call) error {
		if c.Verb == mirrortest.VerbGet {
			api.Remove("kube-system", "etcd-node-a")
		}
		return nil
	})
	client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))

	require.NoError(t, client.CreateMirrorPod(context.Background(), staticPod("etcd-node-a", "hash-1")))
	assert.Equal(t, []mirrortest.Verb{"create", "get", "create"}, verbs(api.Calls()))
	created, ok := api.Pod("kube-system", "etcd-node-a")
	require.True(t, ok)
	assert.Equal(t, "hash-1", created.Annotations[mirror.ConfigMirrorAnnotationKey])
}

// If the name keeps being taken and freed, the client gives up after three
// attempts with the NotFound, rather than looping.
func TestCreateMirrorPodGivesUpOnAFlappingName(t *testing.T) {
	squatter := mirrorPodIn("etcd-node-a", "m1", "hash-0")
	api := mirrortest.NewFakePodAPI()
	api.SetReactor(func(c mirrortest.Call) error {
		switch c.Verb {
		case mirrortest.VerbCreate:
			api.Put(squatter)
		case mirrortest.VerbGet:
			api.Remove("kube-system", "etcd-node-a")
		}
		return nil
	})
	client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))

	err := client.CreateMirrorPod(context.Background(), staticPod("etcd-node-a", "hash-1"))
	require.Error(t, err)
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.Equal(t, []mirrortest.Verb{"create", "get", "create", "get", "create", "get"}, verbs(api.Calls()))
}

func TestClientIsSafeForConcurrentUse(t *testing.T) {
	api := mirrortest.NewFakePodAPI()
	client := newClient(t, api, testNode, nodeUIDIs(testNodeUID, nil))
	ctx := context.Background()
	const workers, rounds = 8, 25

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				// Every worker creates the same shared mirrors: all but
				// the first create of each meet AlreadyExists with the
				// same hash, which is success (D5).
				shared := staticPod(fmt.Sprintf("shared-%d", r%3), "h")
				assert.NoError(t, client.CreateMirrorPod(ctx, shared))
				// And each creates and deletes its own.
				own := staticPod(fmt.Sprintf("own-%d", w), "h")
				assert.NoError(t, client.CreateMirrorPod(ctx, own))
				deleted, err := client.DeleteMirrorPod(ctx, mirror.PodFullName(own), nil)
				assert.NoError(t, err)
				assert.True(t, deleted)
			}
		})
	}
	wg.Wait()
	var names []string
	for _, p := range api.Pods() {
		assert.True(t, mirror.IsMirrorPod(p))
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"shared-0", "shared-1", "shared-2"}, names)
}
