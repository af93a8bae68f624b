package kube_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// The manifests of testdata/docmanifests are taken from Kubernetes'
// documentation (each names its page), unmodified but for what the file's
// comment says. testDocManifests applies each, as a user would, to a
// namespace of its own on an untainted pool of sandboxed nodes, waits for
// the outcome a kubelet reaches, checks podkit's, and logs a table of
// what each did: the table of issue 21's note.

// docOutcome is what a manifest's pods did, as the API server tells it.
type docOutcome struct {
	pods   []v1.Pod
	logs   map[string]string // pod/container: the first KiB of its log
	events []string          // reasons of the namespace's Warning events, each once
}

// docCase is one manifest: until says when its pods reached the outcome
// to judge (within docTimeout), check judges it, differs says how the
// outcome differs from a kubelet's ("" when it does not).
type docCase struct {
	file    string
	until   func(o docOutcome) bool
	check   func(t *testing.T, o docOutcome)
	differs string
}

// docTimeout bounds the wait for one manifest's outcome; the slowest is
// the exec liveness probe's restart (30 s of health, then 3 failures 5 s
// apart) and the CronJob's first run (at the next minute).
const docTimeout = 3 * time.Minute

func testDocManifests(t *testing.T, h *harness) {
	h.openPool(t, "docs", 2)
	cases := []docCase{
		{file: "01-commands.yaml", until: phaseIs(v1.PodSucceeded), check: logHas("command-demo/command-demo-container", "command-demo\n")},
		{file: "02-dapi-envars-pod.yaml", until: logSays("dapi-envars-fieldref/test-container", "default"), check: func(t *testing.T, o docOutcome) {
			log := o.logs["dapi-envars-fieldref/test-container"]
			assert.Contains(t, log, "docs-", "spec.nodeName")
			assert.Contains(t, log, "dapi-envars-fieldref", "metadata.name")
			assert.Contains(t, log, o.pods[0].Status.PodIP, "status.podIP")
		}},
		{file: "03-dapi-envars-container.yaml", until: logSays("dapi-envars-resourcefieldref/test-container", "67108864"),
			check: logHas("dapi-envars-resourcefieldref/test-container", "1\n1\n33554432\n67108864")},
		{file: "04-dapi-volume.yaml", until: logSays("kubernetes-downwardapi-volume-example/client-container", "us-est-coast"),
			check: logHas("kubernetes-downwardapi-volume-example/client-container", `zone="us-est-coast"`, `builder="john-doe"`)},
		{file: "05-configmap-env.yaml", until: phaseIs(v1.PodSucceeded), check: logHas("dapi-test-pod/test-container", "SPECIAL_LEVEL_KEY=very")},
		{file: "06-configmap-envfrom.yaml", until: phaseIs(v1.PodSucceeded), check: logHas("dapi-test-pod-envfrom/test-container", "SPECIAL_LEVEL=very", "SPECIAL_TYPE=charm")},
		{file: "07-configmap-volume.yaml", until: phaseIs(v1.PodSucceeded), check: logHas("dapi-test-pod-volume/test-container", "SPECIAL_LEVEL\nSPECIAL_TYPE")},
		{file: "08-secret-env.yaml", until: waitingWithReason, check: waitsNotFailed, differs: "the image's program (nginx) is not on the host: the container waits"},
		{file: "09-secret-volume.yaml", until: waitingWithReason, check: waitsNotFailed, differs: "the image's program (nginx) is not on the host: the container waits"},
		{file: "10-two-container-emptydir.yaml", until: containerDone("debian-container"), check: func(t *testing.T, o docOutcome) {
			assert.NotEqual(t, v1.PodSucceeded, o.pods[0].Status.Phase, "the nginx container never ran")
		}, differs: "nginx is not on the host; the debian container writes the shared file and ends"},
		{file: "11-exec-liveness.yaml", until: restarted("liveness-exec", 1), check: func(t *testing.T, o docOutcome) {
			assert.Contains(t, o.events, "Unhealthy")
		}},
		{file: "12-http-liveness.yaml", until: waitingWithReason, check: waitsNotFailed, differs: "agnhost is not on the host: the container waits"},
		{file: "13-tcp-liveness-readiness.yaml", until: waitingWithReason, check: waitsNotFailed, differs: "goproxy is not on the host: the container waits"},
		{file: "14-lifecycle-events.yaml", until: waitingWithReason, check: waitsNotFailed, differs: "nginx is not on the host: the container waits, its hooks never run"},
		{file: "15-security-context.yaml", until: phaseIs(v1.PodRunning), check: func(t *testing.T, o docOutcome) {
			assert.True(t, o.pods[0].Status.ContainerStatuses[0].Ready)
		}},
		{file: "16-projected.yaml", until: phaseIs(v1.PodRunning)},
		{file: "17-hostaliases.yaml", until: phaseIs(v1.PodSucceeded), check: logHas("hostaliases-pod/cat-hosts", "127.0.0.1\tfoo.local\tbar.local", "10.1.2.3\tfoo.remote\tbar.remote")},
		{file: "18-job-pi.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, o docOutcome) {
			for k, l := range o.logs {
				assert.True(t, strings.HasPrefix(l, "3.14159"), "%s: %q", k, l)
			}
		}, differs: "the host's perl stands in for the image's"},
		{file: "19-cronjob.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, o docOutcome) {
			for k, l := range o.logs {
				assert.Contains(t, l, "Hello from the Kubernetes cluster", k)
			}
		}},
		{file: "20-deployment.yaml", until: func(o docOutcome) bool { return len(o.pods) >= 3 && waitingWithReason(o) }, check: func(t *testing.T, o docOutcome) {
			assert.Len(t, o.pods, 3, "exactly its replicas: no storm of Failed pods")
			waitsNotFailed(t, o)
		}, differs: "nginx is not on the host: the replicas wait"},
		{file: "21-sidecar-deployment.yaml", until: logSays("*/logshipper", "logging"), check: func(t *testing.T, o docOutcome) {
			assert.Len(t, o.pods, 1)
		}},
		{file: "22-sidecar-job.yaml", until: phaseIs(v1.PodSucceeded), check: logHas("*/logshipper", "logging")},
		{file: "23-statefulset.yaml", until: func(o docOutcome) bool { return len(o.pods) >= 1 && waitingWithReason(o) }, check: func(t *testing.T, o docOutcome) {
			assert.Len(t, o.pods, 1, "web-1 waits for web-0 to be Ready, as the StatefulSet's ordered start says")
		}, differs: "nginx-slim is not on the host: web-0 waits, so web-1 and web-2 are never created"},
		{file: "24-init-containers.yaml", until: logSays("myapp-pod/init-myservice", "waiting for myservice"), check: func(t *testing.T, o docOutcome) {
			assert.Equal(t, v1.PodPending, o.pods[0].Status.Phase, "Init:0/2 until the services exist, as on a kubelet")
		}},
		{file: "25-active-deadline.yaml", until: func(o docOutcome) bool {
			return len(o.pods) > 0 && o.pods[0].Status.Phase == v1.PodFailed
		}, check: func(t *testing.T, o docOutcome) {
			assert.Equal(t, "DeadlineExceeded", o.pods[0].Status.Reason)
		}},
	}
	var mu sync.Mutex
	table := map[string]string{}
	t.Cleanup(func() {
		files := make([]string, 0, len(table))
		for f := range table {
			files = append(files, f)
		}
		slices.Sort(files)
		var b strings.Builder
		for _, f := range files {
			fmt.Fprintf(&b, "%s\n", table[f])
		}
		t.Logf("documented manifests on podkit:\n%s", b.String())
	})
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			ns := h.namespace(t, "docs-"+c.file[:2])
			h.kubectl.run(t, "apply", "-n", ns, "-f", filepath.Join("testdata", "docmanifests", c.file))
			o, err := waitDocOutcome(h.c.Admin(), ns, c.until)
			row := fmt.Sprintf("%-32s %s", c.file, o.summary())
			if c.differs != "" {
				row += " — differs: " + c.differs
			}
			mu.Lock()
			table[c.file] = row
			mu.Unlock()
			if !assert.NoError(t, err, "the outcome of %s: %s", c.file, o.summary()) {
				return
			}
			if c.check != nil {
				c.check(t, o)
			}
			if t.Failed() {
				t.Logf("%s: %s\nlogs: %v", c.file, o.summary(), o.logs)
			}
		})
	}
}

// waitDocOutcome observes namespace's pods until until holds.
func waitDocOutcome(cs kubernetes.Interface, namespace string, until func(docOutcome) bool) (docOutcome, error) {
	var o docOutcome
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, docTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if o, err = observe(ctx, cs, namespace); err != nil {
			return false, nil
		}
		return until(o), nil
	})
	return o, err
}

func observe(ctx context.Context, cs kubernetes.Interface, namespace string) (docOutcome, error) {
	o := docOutcome{logs: map[string]string{}}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, err
	}
	o.pods = pods.Items
	slices.SortFunc(o.pods, func(a, b v1.Pod) int { return strings.Compare(a.Name, b.Name) })
	limit := int64(1024)
	for _, p := range o.pods {
		for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			b, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &v1.PodLogOptions{Container: c.Name, LimitBytes: &limit}).DoRaw(ctx)
			if err == nil {
				o.logs[p.Name+"/"+c.Name] = string(b)
			}
		}
	}
	events, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, err
	}
	for _, e := range events.Items {
		if e.Type == v1.EventTypeWarning && !slices.Contains(o.events, e.Reason) {
			o.events = append(o.events, e.Reason)
		}
	}
	return o, nil
}

// summary is one line: each pod's phase (reason) and containers.
func (o docOutcome) summary() string {
	if len(o.pods) == 0 {
		return "no pod"
	}
	var parts []string
	for _, p := range o.pods {
		s := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
		if p.Status.Reason != "" {
			s += "(" + p.Status.Reason + ")"
		}
		var cs []string
		for _, c := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			cs = append(cs, c.Name+":"+containerState(c))
		}
		parts = append(parts, s+" ["+strings.Join(cs, " ")+"]")
	}
	out := strings.Join(parts, "; ")
	if len(o.events) > 0 {
		out += " warnings: " + strings.Join(o.events, ",")
	}
	return out
}

func containerState(c v1.ContainerStatus) string {
	var s string
	switch {
	case c.State.Running != nil:
		s = "running"
		if c.Ready {
			s += ",ready"
		}
	case c.State.Waiting != nil:
		s = "waiting(" + c.State.Waiting.Reason + ")"
	case c.State.Terminated != nil:
		s = fmt.Sprintf("terminated(%s,%d)", c.State.Terminated.Reason, c.State.Terminated.ExitCode)
	default:
		s = "unknown"
	}
	if c.RestartCount > 0 {
		s += fmt.Sprintf(",restarts=%d", c.RestartCount)
	}
	return s
}

// matching returns the logs whose pod/container key matches key, where
// a pod of "*" matches any pod.
func (o docOutcome) matching(key string) []string {
	pod, container, _ := strings.Cut(key, "/")
	var out []string
	for k, l := range o.logs {
		p, c, _ := strings.Cut(k, "/")
		if (pod == "*" || p == pod) && c == container {
			out = append(out, l)
		}
	}
	return out
}

func phaseIs(phase v1.PodPhase) func(docOutcome) bool {
	return func(o docOutcome) bool {
		return len(o.pods) > 0 && slices.ContainsFunc(o.pods, func(p v1.Pod) bool { return p.Status.Phase == phase })
	}
}

func logSays(key, text string) func(docOutcome) bool {
	return func(o docOutcome) bool {
		return slices.ContainsFunc(o.matching(key), func(l string) bool { return strings.Contains(l, text) })
	}
}

func logHas(key string, texts ...string) func(*testing.T, docOutcome) {
	return func(t *testing.T, o docOutcome) {
		logs := o.matching(key)
		if !assert.NotEmpty(t, logs, "a log of %s", key) {
			return
		}
		for _, text := range texts {
			assert.True(t, slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, text) }), "%s says %q: %q", key, text, logs)
		}
	}
}

// waitingWithReason: a container of a pod waits with a reason other than
// ContainerCreating, as one whose program cannot run does.
func waitingWithReason(o docOutcome) bool {
	for _, p := range o.pods {
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				return true
			}
		}
	}
	return false
}

// waitsNotFailed: no pod Failed, each waits with a reason and a message.
func waitsNotFailed(t *testing.T, o docOutcome) {
	for _, p := range o.pods {
		assert.NotEqual(t, v1.PodFailed, p.Status.Phase, p.Name)
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				assert.NotEmpty(t, w.Message, "%s/%s waits with a message", p.Name, c.Name)
			}
		}
	}
}

func containerDone(name string) func(docOutcome) bool {
	return func(o docOutcome) bool {
		for _, p := range o.pods {
			for _, c := range p.Status.ContainerStatuses {
				if c.Name == name && c.State.Terminated != nil {
					return true
				}
			}
		}
		return false
	}
}

func restarted(pod string, n int32) func(docOutcome) bool {
	return func(o docOutcome) bool {
		for _, p := range o.pods {
			if p.Name == pod && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= n {
				return true
			}
		}
		return false
	}
}
