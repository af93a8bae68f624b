package virtualkubelet_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/podworker"
)

const (
	testNS   = "default"
	nodeName = "vk-node"
	// patience bounds every wait for an eventual state.
	patience = 30 * time.Second
)

var podsGVR = v1.SchemeGroupVersion.WithResource("pods")

// env is one virtual-kubelet PodController, with client-go's fake
// clientset and informers as virtual-kubelet's own tests use them, driving
// a Provider over a simulated cloud.
type env struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	cloud    *simcloud.Cloud
	provider *vk.Provider
	pc       *node.PodController
	poll     time.Duration
}

type envOptions struct {
	cloud    simcloud.Options
	provider vk.Options
	// informerResync is the informers' resync period (0: none).
	informerResync time.Duration
	// before runs after the fakes exist and before anything starts.
	before func(e *env)
	// poll is the interval of eventually's polling; 5ms when zero.
	poll time.Duration
	// reactors are prepended to the fake clientset's after the API server
	// semantics, so they run first.
	reactors func(c *fake.Clientset)
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// The fake clientset without field management: NewClientset's tracker
	// rebuilds a REST mapper on every write, which makes a hundred pods
	// take seconds under -race, and nothing here uses server-side apply.
	client := fake.NewSimpleClientset() //nolint:staticcheck // see above
	apiServerSemantics(client)
	if o.reactors != nil {
		o.reactors(client)
	}
	factory := informers.NewSharedInformerFactory(client, o.informerResync)
	podInformer := factory.Core().V1().Pods()

	cloud, err := simcloud.New(o.cloud)
	require.NoError(t, err)
	opts := o.provider
	opts.Pods = podInformer.Lister()
	setDefault(&opts.ResyncInterval, 50*time.Millisecond)
	setDefault(&opts.HousekeepingInterval, 50*time.Millisecond)
	setDefault(&opts.BackOff, 10*time.Millisecond)
	setDefault(&opts.MaxBackOff, 200*time.Millisecond)
	setDefault(&opts.NotifyRetry, 10*time.Millisecond)
	setDefault(&opts.NotifyRetryMax, 200*time.Millisecond)
	provider, err := vk.New(cloud, opts)
	require.NoError(t, err)

	fast := func() workqueue.TypedRateLimiter[any] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, 50*time.Millisecond)
	}
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:                            client.CoreV1(),
		PodInformer:                          podInformer,
		EventRecorder:                        &record.FakeRecorder{},
		Provider:                             provider,
		ConfigMapInformer:                    factory.Core().V1().ConfigMaps(),
		SecretInformer:                       factory.Core().V1().Secrets(),
		ServiceInformer:                      factory.Core().V1().Services(),
		SyncPodsFromKubernetesRateLimiter:    fast(),
		DeletePodsFromKubernetesRateLimiter:  fast(),
		SyncPodStatusFromProviderRateLimiter: fast(),
	})
	require.NoError(t, err)
	e := &env{t: t, ctx: ctx, client: client, cloud: cloud, provider: provider, pc: pc, poll: o.poll}
	setDefault(&e.poll, 5*time.Millisecond)
	if o.before != nil {
		o.before(e)
	}

	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		require.True(t, ok, "informer for %v did not sync", typ)
	}
	providerDone := make(chan error, 1)
	go func() { providerDone <- provider.Run(ctx) }()
	go func() { _ = pc.Run(ctx, 8) }()
	t.Cleanup(func() {
		cancel()
		<-pc.Done()
		require.NoError(t, <-providerDone)
		factory.Shutdown()
	})
	select {
	case <-pc.Ready():
	case <-pc.Done():
		t.Fatalf("pod controller stopped: %v", pc.Err())
	}
	return e
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d == 0 {
		*d = v
	}
}

// apiServerSemantics makes the fake clientset behave like a real API
// server where virtual-kubelet depends on it: an update of the main
// resource keeps the status and an update of the status subresource keeps
// everything else; an update whose object carries another UID than the
// stored one is a conflict (the UID precondition every PUT carries);
// resource versions advance; a delete with a UID precondition that does
// not match is a conflict; and a delete with a grace period of a pod bound
// to a node only sets its deletion timestamp and grace period, the pod
// staying until it is deleted with grace 0 (as virtual-kubelet does).
func apiServerSemantics(c *fake.Clientset) {
	tracker := c.Tracker()
	podsGR := podsGVR.GroupResource()
	get := func(ns, name string) (*v1.Pod, error) {
		obj, err := tracker.Get(podsGVR, ns, name)
		if err != nil {
			return nil, err
		}
		return obj.(*v1.Pod), nil
	}
	store := func(pod *v1.Pod, cur *v1.Pod) (*v1.Pod, error) {
		rv, _ := strconv.Atoi(cur.ResourceVersion)
		pod.ResourceVersion = strconv.Itoa(rv + 1)
		return pod, tracker.Update(podsGVR, pod, pod.Namespace)
	}
	c.PrependReactor("update", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		ua := a.(ktesting.UpdateAction)
		pod := ua.GetObject().(*v1.Pod).DeepCopy()
		cur, err := get(ua.GetNamespace(), pod.Name)
		if err != nil {
			return true, nil, err
		}
		if pod.UID != "" && pod.UID != cur.UID {
			return true, nil, apierrors.NewConflict(podsGR, pod.Name,
				fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", pod.UID, cur.UID))
		}
		if ua.GetSubresource() == "status" {
			next := cur.DeepCopy()
			next.Status = pod.Status
			pod = next
		} else {
			pod.Status = cur.Status
		}
		pod, err = store(pod, cur)
		return true, pod, err
	})
	c.PrependReactor("delete", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		da := a.(ktesting.DeleteAction)
		cur, err := get(da.GetNamespace(), da.GetName())
		if err != nil {
			return true, nil, err
		}
		opts := da.GetDeleteOptions()
		if pc := opts.Preconditions; pc != nil && pc.UID != nil && *pc.UID != cur.UID {
			return true, nil, apierrors.NewConflict(podsGR, cur.Name,
				fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pc.UID, cur.UID))
		}
		grace := int64(30)
		if g := cur.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		if opts.GracePeriodSeconds != nil {
			grace = *opts.GracePeriodSeconds
		}
		if grace <= 0 || cur.Spec.NodeName == "" {
			return false, nil, nil // removed at once by the default reactor
		}
		if cur.DeletionTimestamp == nil || grace < *cur.DeletionGracePeriodSeconds {
			next := cur.DeepCopy()
			ts := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second))
			next.DeletionTimestamp, next.DeletionGracePeriodSeconds = &ts, &grace
			if _, err := store(next, cur); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
}

// newPod returns a pod bound to the test node with one container.
func newPod(name string, uid types.UID) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: uid, ResourceVersion: "1"},
		Spec: v1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 v1.RestartPolicyAlways,
			Containers:                    []v1.Container{{Name: "app", Image: "nginx:1"}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
}

func (e *env) create(pod *v1.Pod) {
	e.t.Helper()
	_, err := e.client.CoreV1().Pods(pod.Namespace).Create(e.ctx, pod, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

func (e *env) delete(name string, grace int64) {
	e.t.Helper()
	err := e.client.CoreV1().Pods(testNS).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	require.NoError(e.t, err)
}

// apiPod reads a pod from the fake API server; nil when it has none.
func (e *env) apiPod(name string) *v1.Pod {
	e.t.Helper()
	pod, err := e.client.CoreV1().Pods(testNS).Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(e.t, err)
	return pod
}

// eventually polls cond until it holds, failing the test after patience.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, e.poll, patience, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	require.NoError(e.t, err, "waiting for %s", what)
}

// waitAPI waits until the API server's pod satisfies cond (nil: absent)
// and returns it.
func (e *env) waitAPI(name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	e.t.Helper()
	var pod *v1.Pod
	e.eventually(name+": "+what, func() bool {
		pod = e.apiPod(name)
		return cond(pod)
	})
	return pod
}

func isRunning(p *v1.Pod) bool {
	return p != nil && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) > 0 &&
		p.Status.ContainerStatuses[0].State.Running != nil
}

func isTerminal(p *v1.Pod) bool {
	return p != nil && podstatus.IsTerminal(p.Status.Phase)
}

func isAbsent(p *v1.Pod) bool { return p == nil }

// remote returns the cloud's pod with uid, or nil.
func (e *env) remote(uid types.UID) *vk.RemotePod {
	for _, rp := range e.cloud.Pods() {
		if rp.UID == uid {
			return &rp
		}
	}
	return nil
}

// calls returns the calls the cloud saw for uid, of the given operations.
func (e *env) calls(uid types.UID, ops ...simcloud.Op) []simcloud.Call {
	var out []simcloud.Call
	for _, c := range e.cloud.Calls(ops...) {
		if c.UID == uid {
			out = append(out, c)
		}
	}
	return out
}

// succeeded keeps the calls that did not fail.
func succeeded(calls []simcloud.Call) []simcloud.Call {
	var out []simcloud.Call
	for _, c := range calls {
		if c.Err == nil {
			out = append(out, c)
		}
	}
	return out
}

// ops lists the operations of calls, with Stop's grace, for comparison.
func ops(calls []simcloud.Call) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		s := string(c.Op)
		if c.Op == simcloud.OpStop {
			s += "(" + c.Grace.String() + ")"
		}
		out = append(out, s)
	}
	return out
}

// waitForgotten waits until the engine has no worker for uid.
func (e *env) waitForgotten(uid types.UID) {
	e.t.Helper()
	e.eventually("engine to forget "+string(uid), func() bool {
		_, ok := e.provider.PodWorkers().Pod(uid)
		return !ok
	})
}

// waitStage waits, without polling, until uid's worker reaches cond.
func (e *env) waitStage(uid types.UID, what string, cond func(podworker.PodInfo, bool) bool) podworker.PodInfo {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, patience)
	defer cancel()
	info, _, err := e.provider.PodWorkers().WaitFor(ctx, uid, cond)
	require.NoError(e.t, err, "waiting for %s: %s", uid, what)
	return info
}
