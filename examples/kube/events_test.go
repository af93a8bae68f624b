package kube_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	kubectldescribe "k8s.io/kubectl/pkg/describe"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/events"
)

// eventsOf lists the events recorded about the object uid.
func eventsOf(t *testing.T, cs kubernetes.Interface, namespace, uid string) []v1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events(namespace).List(testContext(t), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", uid).String(),
	})
	require.NoError(t, err)
	return list.Items
}

// eventMatch describes an event a test expects.
type eventMatch struct {
	typ, reason, fieldPath string
	// message is matched in full, or as a prefix when it ends with "...".
	message string
	// minCount, when set, is the least count (aggregated occurrences).
	minCount int32
}

func (m eventMatch) matches(ev v1.Event) bool {
	msg := ev.Message
	want, prefix := strings.CutSuffix(m.message, "...")
	if prefix {
		msg = msg[:min(len(msg), len(want))]
	}
	return ev.Type == m.typ && ev.Reason == m.reason && ev.InvolvedObject.FieldPath == m.fieldPath && msg == want && ev.Count >= m.minCount
}

func (m eventMatch) String() string {
	return fmt.Sprintf("%s %s %s %q", m.typ, m.reason, m.fieldPath, m.message)
}

// waitForEvent waits until an event about uid matches m, and returns it.
func waitForEvent(t *testing.T, cs kubernetes.Interface, namespace, uid string, m eventMatch) v1.Event {
	t.Helper()
	var found v1.Event
	var last []v1.Event
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		last = eventsOf(t, cs, namespace, uid)
		for _, ev := range last {
			if m.matches(ev) {
				found = ev
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no event %s; events: %s", m, eventSummary(last))
	return found
}

func eventSummary(evs []v1.Event) string {
	var parts []string
	for _, ev := range evs {
		parts = append(parts, fmt.Sprintf("[%s %s %s x%d %q from %s/%s]", ev.Type, ev.Reason, ev.InvolvedObject.FieldPath, ev.Count, ev.Message, ev.Source.Component, ev.Source.Host))
	}
	return strings.Join(parts, " ")
}

// describePod returns what kubectl describe pod prints.
func describePod(t *testing.T, cs kubernetes.Interface, namespace, name string) string {
	t.Helper()
	d := &kubectldescribe.PodDescriber{Interface: cs}
	out, err := d.Describe(namespace, name, kubectldescribe.DescriberSettings{ShowEvents: true, ChunkSize: 500})
	require.NoError(t, err)
	return out
}

// testAgentEvents: a pod that starts, crash-loops and is deleted has the
// kubelet's events, as the events API and kubectl describe show them; so
// do an admission rejection, a command that cannot start, and the node.
func testAgentEvents(t *testing.T, c *cluster) {
	const node = "events-node"
	a := runAgent(t, agent.Config{
		Client:            c.nodeClient(t, node),
		NodeName:          node,
		StateDir:          t.TempDir(),
		RestartBackOff:    200 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond,
	})
	a.workers(t)

	pod := apiPod("crashloop", node)
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	pod.Spec.Containers = []v1.Container{
		{Name: "web", Image: "example.com/web", Command: []string{"/bin/sh", "-c", "while true; do sleep 0.05; done"}},
		{Name: "crash", Image: "example.com/crash", Command: []string{"/bin/sh", "-c", "echo crashing; exit 3"}},
	}
	pod = createPod(t, c, pod)
	uid := string(pod.UID)
	for _, m := range []eventMatch{
		{v1.EventTypeNormal, "Created", "spec.containers{web}", "Container created", 0},
		{v1.EventTypeNormal, "Started", "spec.containers{web}", "Container started", 0},
		{v1.EventTypeNormal, "Created", "spec.containers{crash}", "Container created", 0},
		{v1.EventTypeWarning, "BackOff", "spec.containers{crash}",
			fmt.Sprintf("Back-off restarting failed container crash in pod crashloop_default(%s)", uid), 0},
	} {
		ev := waitForEvent(t, c.admin, "default", uid, m)
		assert.Equal(t, events.DefaultComponent, ev.Source.Component)
		assert.Equal(t, node, ev.Source.Host)
	}
	// The crash loop started the container again and again: one event,
	// counted, not one per start.
	waitForEvent(t, c.admin, "default", uid, eventMatch{v1.EventTypeNormal, "Started", "spec.containers{crash}", "Container started", 2})
	// While it waits out its backoff, its status says so in the kubelet's
	// words, with the backoff waited out.
	crashLoop := regexp.MustCompile(`^back-off ([0-9.]+m?s) restarting failed container=crash pod=crashloop_default\(` + uid + `\)$`)
	waitForPod(t, c.admin, "default", pod.Name, "crash in CrashLoopBackOff", func(p *v1.Pod) bool {
		if p == nil {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; cs.Name == "crash" && w != nil && w.Reason == "CrashLoopBackOff" && crashLoop.MatchString(w.Message) {
				backOff, err := time.ParseDuration(crashLoop.FindStringSubmatch(w.Message)[1])
				return err == nil && backOff >= 200*time.Millisecond
			}
		}
		return false
	})

	out := describePod(t, c.admin, "default", pod.Name)
	t.Logf("kubectl describe pod %s:\n%s", pod.Name, out)
	assert.Regexp(t, `(?m)^Node:\s+`+node+`/`, out)
	for _, want := range []string{"Created", "Started", "BackOff", "Back-off restarting failed container crash in pod crashloop_default"} {
		assert.Contains(t, out, want)
	}

	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), pod.Name, metav1.DeleteOptions{}))
	waitForPod(t, c.admin, "default", pod.Name, "deleted", func(p *v1.Pod) bool { return p == nil })
	waitForEvent(t, c.admin, "default", uid, eventMatch{v1.EventTypeNormal, "Killing", "spec.containers{web}", "Stopping container web", 0})

	// A pod that does not fit is rejected at admission, with an event.
	big := apiPod("too-big", node, "/bin/true")
	big.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000")}
	big = createPod(t, c, big)
	waitForEvent(t, c.admin, "default", string(big.UID), eventMatch{v1.EventTypeWarning, "OutOfcpu", "",
		"Node didn't have enough resource: cpu, requested: 1000000, used: 0, capacity: ...", 0})
	rejected := waitForPod(t, c.admin, "default", big.Name, "Failed", isPhase(v1.PodFailed))
	assert.Equal(t, "OutOfcpu", rejected.Status.Reason)

	// A command that cannot start: Failed, with the runtime's error.
	missing := createPod(t, c, apiPod("no-such-command", node, "/nonexistent/command"))
	ev := waitForEvent(t, c.admin, "default", string(missing.UID), eventMatch{v1.EventTypeWarning, "Failed", "spec.containers{main}", "Error: ...", 0})
	assert.Contains(t, ev.Message, "/nonexistent/command")

	// The node: the agent started, and its Node became Ready.
	n, err := c.admin.CoreV1().Nodes().Get(testContext(t), node, metav1.GetOptions{})
	require.NoError(t, err)
	waitForEvent(t, c.admin, "default", string(n.UID), eventMatch{v1.EventTypeNormal, "Starting", "", "Starting podkit agent.", 0})
	waitForEvent(t, c.admin, "default", string(n.UID), eventMatch{v1.EventTypeNormal, "NodeReady", "", "Node events-node status is now: NodeReady", 0})
	n, err = c.admin.CoreV1().Nodes().Get(testContext(t), node, metav1.GetOptions{})
	require.NoError(t, err)
	var ready *v1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	require.NotNil(t, ready, "the Node has a Ready condition")
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	assert.Equal(t, "KubeletReady", ready.Reason, "the kubelet's reason, which dashboards match on")
}

// testEventSinkFailure: an agent whose event sink never answers loses its
// events, not its pods: they run, crash-loop, complete and are deleted as
// usual, and the agent stops cleanly.
func testEventSinkFailure(t *testing.T, c *cluster) {
	const node = "sinkfail-node"
	real := c.nodeClient(t, node)
	var writes atomic.Int64
	cs := interceptedClient{Interface: real, core: interceptedCore{
		CoreV1Interface: real.CoreV1(),
		events: func(e corev1client.EventInterface) corev1client.EventInterface {
			return hungEvents{EventInterface: e, writes: &writes}
		},
	}}
	a := runAgent(t, agent.Config{Client: cs, NodeName: node, StateDir: t.TempDir(), RestartBackOff: 50 * time.Millisecond})

	loop := apiPod("sink-crashloop", node, "/bin/sh", "-c", "exit 1")
	loop.Spec.RestartPolicy = v1.RestartPolicyAlways
	loop = createPod(t, c, loop)
	var done []*v1.Pod
	for i := range 5 {
		done = append(done, createPod(t, c, apiPod(fmt.Sprintf("sink-done-%d", i), node, "/bin/sh", "-c", "echo done")))
	}
	for _, p := range done {
		waitForPod(t, c.admin, "default", p.Name, "Succeeded", isPhase(v1.PodSucceeded))
	}
	waitForPod(t, c.admin, "default", loop.Name, "restarted 3 times", func(p *v1.Pod) bool {
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 3
	})
	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), loop.Name, metav1.DeleteOptions{}))
	waitForPod(t, c.admin, "default", loop.Name, "deleted", func(p *v1.Pod) bool { return p == nil })

	assert.Positive(t, writes.Load(), "the agent tried to send events")
	assert.Empty(t, eventsOf(t, c.admin, "default", string(loop.UID)), "no event reached the API server")
	a.Stop(t)
}
