package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/clustertest"
)

// The manifests of testdata/docmanifests are taken from Kubernetes'
// documentation (each names its page; README.md has the table of what
// each did), unmodified but for what the file's comment says.
// testDocManifests applies each with kubectl, as a user would, to a
// namespace of its own on a pool of untainted, sandboxed nodes (so the
// manifests need no node selector or toleration: the other scenarios'
// nodes are tainted), waits for the outcome a kubelet reaches, and checks
// podkit's: a manifest whose program the host lacks must wait with the
// kubelet's reason and events, never fail its pod, and under a
// controller get exactly its replicas.

// docOutcome is what a manifest's pods did, as the API server tells it.
type docOutcome struct {
	pods   []v1.Pod
	logs   map[string]string // pod/container: the first KiB of its log
	events []v1.Event        // the namespace's
}

// docRun is one manifest's namespace, for checks that need more than its
// outcome (exec into a pod, the controller's objects).
type docRun struct {
	h  *harness
	ns string
	o  docOutcome
}

// docCase is one manifest: until says when its pods reached the outcome
// to judge (within docTimeout), check judges it.
type docCase struct {
	file  string
	until func(o docOutcome) bool
	check func(t *testing.T, r *docRun)
}

// docTimeout bounds the wait for one manifest's outcome; the slowest are
// the exec liveness probe's restart (30 s of health, then 3 failures 5 s
// apart) and the CronJob's first run (at the next minute).
const docTimeout = 3 * time.Minute

// docPool is the pool the manifests run on: untainted, unlike the
// harness's pools, so that pods without a node selector land there and
// only there.
const docPool = "docs"

func testDocManifests(t *testing.T, h *harness) {
	docNodes(t, h, 2)
	notStarted := waitingIn("RunContainerError", "CrashLoopBackOff")
	cases := []docCase{
		{file: "01-commands.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, r *docRun) {
			// HOSTNAME is the pod's name; KUBERNETES_PORT a service link
			// (enableServiceLinks) of the kubernetes Service.
			logHas(t, r.o, "command-demo/command-demo-container", "command-demo\ntcp://")
		}},
		{file: "02-dapi-envars-pod.yaml", until: allOf(logSays("dapi-envars-fieldref/test-container", "default\n"), readyPods(1)), check: func(t *testing.T, r *docRun) {
			p := r.o.pods[0]
			require.NotEmpty(t, p.Status.PodIP)
			logHas(t, r.o, "dapi-envars-fieldref/test-container", fmt.Sprintf("%s\n%s\n%s\n%s\ndefault\n", p.Spec.NodeName, p.Name, r.ns, p.Status.PodIP))
		}},
		{file: "03-dapi-envars-container.yaml", until: allOf(logSays("dapi-envars-resourcefieldref/test-container", "67108864"), readyPods(1)), check: func(t *testing.T, r *docRun) {
			logHas(t, r.o, "dapi-envars-resourcefieldref/test-container", "1\n1\n33554432\n67108864\n")
		}},
		{file: "04-dapi-volume.yaml", until: readyPods(1), check: func(t *testing.T, r *docRun) {
			assert.Equal(t, "cluster=\"test-cluster1\"\nrack=\"rack-22\"\nzone=\"us-est-coast\"",
				r.exec(t, "kubernetes-downwardapi-volume-example", "client-container", "cat", "/etc/podinfo/labels"))
			annotations := r.exec(t, "kubernetes-downwardapi-volume-example", "client-container", "cat", "/etc/podinfo/annotations")
			assert.Contains(t, annotations, "build=\"two\"\n")
			assert.Contains(t, annotations, "builder=\"john-doe\"")
		}},
		{file: "05-configmap-env.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, r *docRun) {
			logHas(t, r.o, "dapi-test-pod/test-container", "SPECIAL_LEVEL_KEY=very\n")
		}},
		{file: "06-configmap-envfrom.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, r *docRun) {
			logHas(t, r.o, "dapi-test-pod-envfrom/test-container", "SPECIAL_LEVEL=very\n", "SPECIAL_TYPE=charm\n")
		}},
		{file: "07-configmap-volume.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, r *docRun) {
			assert.Equal(t, "SPECIAL_LEVEL\nSPECIAL_TYPE\n", r.o.logs["dapi-test-pod-volume/test-container"])
		}},
		{file: "08-secret-env.yaml", until: notStarted, check: refusedProgram("nginx")},
		{file: "09-secret-volume.yaml", until: notStarted, check: refusedProgram("nginx")},
		{file: "10-two-container-emptydir.yaml", until: phaseIs(v1.PodFailed), check: func(t *testing.T, r *docRun) {
			// nginx is not on the node: its start fails, and under
			// restartPolicy Never that ends the pod Failed, as a kubelet
			// ends one whose container cannot start.
			c := containerStatus(r.o.pods[0], "debian-container")
			require.NotNil(t, c.State.Terminated)
			assert.Equal(t, int32(0), c.State.Terminated.ExitCode, "the debian container wrote the shared file: %+v", c.State.Terminated)
			n := containerStatus(r.o.pods[0], "nginx-container")
			require.NotNil(t, n.State.Terminated, "%+v", n)
			assert.Equal(t, "StartError", n.State.Terminated.Reason)
			assert.Equal(t, int32(128), n.State.Terminated.ExitCode)
			eventSeen(t, r, "Failed", "nginx")
		}},
		{file: "11-exec-liveness.yaml", until: restarted("liveness-exec", 1), check: func(t *testing.T, r *docRun) {
			eventSeen(t, r, "Unhealthy", "Liveness probe failed")
			eventSeen(t, r, "Killing", "failed liveness probe, will be restarted")
			assert.Equal(t, v1.PodRunning, r.o.pods[0].Status.Phase)
		}},
		{file: "12-http-liveness.yaml", until: waitingIn("CreateContainerConfigError"), check: refusedCommand},
		{file: "13-tcp-liveness-readiness.yaml", until: waitingIn("CreateContainerConfigError", "CreateContainerError"), check: refusedCommand},
		{file: "14-lifecycle-events.yaml", until: notStarted, check: func(t *testing.T, r *docRun) {
			refusedProgram("nginx")(t, r)
			assert.False(t, slices.ContainsFunc(r.o.events, func(e v1.Event) bool { return e.Reason == "FailedPostStartHook" }), "no postStart ran")
		}},
		{file: "15-security-context.yaml", until: readyPods(1), check: func(t *testing.T, r *docRun) {
			ids := strings.Fields(r.exec(t, "security-context-demo", "sec-ctx-demo", "sh", "-c", "id -u; id -g; id -G"))
			require.GreaterOrEqual(t, len(ids), 2, "id's output: %v", ids)
			assert.Equal(t, []string{"1000", "3000"}, ids[:2], "runAsUser, runAsGroup")
			assert.Subset(t, ids[2:], []string{"3000", "2000", "4000"}, "the groups: runAsGroup, fsGroup, supplementalGroups")
			assert.Equal(t, "2000", r.exec(t, "security-context-demo", "sec-ctx-demo", "stat", "-c", "%g", "/data/demo"), "the emptyDir's group is the fsGroup")
			assert.Equal(t, "NoNewPrivs:\t1", r.exec(t, "security-context-demo", "sec-ctx-demo", "grep", "NoNewPrivs", "/proc/self/status"), "allowPrivilegeEscalation: false")
		}},
		{file: "16-projected.yaml", until: readyPods(1), check: func(t *testing.T, r *docRun) {
			assert.Equal(t, "password.txt\nusername.txt", r.exec(t, "test-projected-volume", "test-projected-volume", "ls", "/projected-volume"))
			assert.Equal(t, "admin", r.exec(t, "test-projected-volume", "test-projected-volume", "cat", "/projected-volume/username.txt"))
		}},
		{file: "17-hostaliases.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, r *docRun) {
			logHas(t, r.o, "hostaliases-pod/cat-hosts", "# Entries added by HostAliases.\n127.0.0.1\tfoo.local\tbar.local\n10.1.2.3\tfoo.remote\tbar.remote\n")
		}},
		{file: "18-job-pi.yaml", until: func(o docOutcome) bool {
			return phaseIs(v1.PodSucceeded)(o) || (phaseIs(v1.PodFailed)(o) && len(o.pods) >= 2)
		}, check: func(t *testing.T, r *docRun) {
			// The node's perl stands in for the image's: where it computes
			// bpi(2000) the Job completes; where it fails (Debian's perl
			// 5.36 dies in Math::BigInt::Calc) the pod Fails with perl's
			// exit code and the Job makes another, as a kubelet does for a
			// program that exits so under restartPolicy Never.
			first := r.o.pods[0]
			for _, p := range r.o.pods {
				if p.CreationTimestamp.Before(&first.CreationTimestamp) {
					first = p
				}
			}
			want, hostOK := hostPi(t)
			log := r.o.logs[first.Name+"/pi"]
			if hostOK {
				assert.Equal(t, v1.PodSucceeded, first.Status.Phase)
				assert.True(t, strings.HasPrefix(log, want), "%q", log)
				r.jobComplete(t, "pi")
				return
			}
			assert.Equal(t, v1.PodFailed, first.Status.Phase)
			c := containerStatus(first, "pi")
			require.NotNil(t, c.State.Terminated)
			assert.Equal(t, want, fmt.Sprintf("exit %d: %s", c.State.Terminated.ExitCode, strings.TrimSpace(log)), "the pod fails as perl does on the host")
			assert.GreaterOrEqual(t, countEvents(r.o, "SuccessfulCreate"), 2, "the Job replaces its failed pod")
		}},
		{file: "19-cronjob.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, r *docRun) {
			logHas(t, r.o, "*/hello", "Hello from the Kubernetes cluster\n")
			// each minute would start another run until the end of the test
			r.h.kubectl.run(t, "delete", "-n", r.ns, "cronjob", "hello")
		}},
		{file: "20-deployment.yaml", until: allWaitingIn(3, "CrashLoopBackOff"), check: func(t *testing.T, r *docRun) {
			refusedProgram("nginx")(t, r)
			assert.Len(t, r.o.pods, 3, "exactly its replicas")
			assert.Equal(t, 3, countEvents(r.o, "SuccessfulCreate"), "the ReplicaSet created 3 pods, no more: no storm of Failed pods")
		}},
		{file: "21-sidecar-deployment.yaml", until: allOf(logSays("*/logshipper", "logging"), readyPods(1)), check: func(t *testing.T, r *docRun) {
			require.Len(t, r.o.pods, 1)
			p := r.o.pods[0]
			assert.Equal(t, v1.PodRunning, p.Status.Phase)
			assert.True(t, containerStatus(p, "myapp").Ready, "myapp")
			assert.True(t, containerStatus(p, "logshipper").Ready, "a running sidecar is Ready")
		}},
		{file: "22-sidecar-job.yaml", until: phaseIs(v1.PodSucceeded), check: func(t *testing.T, r *docRun) {
			// Whether logshipper's tail -F saw the line before it was
			// stopped is a race of the manifest's own, on a kubelet too:
			// the order is what the node owes.
			require.Len(t, r.o.pods, 1)
			sidecar := containerStatus(r.o.pods[0], "logshipper")
			main := containerStatus(r.o.pods[0], "myjob")
			require.NotNil(t, sidecar.State.Terminated, "the sidecar is stopped: %+v", sidecar)
			require.NotNil(t, main.State.Terminated, "%+v", main)
			assert.Equal(t, int32(0), main.State.Terminated.ExitCode)
			assert.False(t, sidecar.State.Terminated.StartedAt.After(main.State.Terminated.StartedAt.Time), "the sidecar starts first")
			assert.False(t, sidecar.State.Terminated.FinishedAt.Before(&main.State.Terminated.FinishedAt), "the sidecar is stopped after the job's container")
			r.jobComplete(t, "myjob")
		}},
		{file: "23-statefulset.yaml", until: waitingIn("CreateContainerConfigError"), check: func(t *testing.T, r *docRun) {
			refusedCommand(t, r)
			require.Len(t, r.o.pods, 1, "web-1 waits for web-0 to be Ready (OrderedReady)")
			assert.Equal(t, "web-0", r.o.pods[0].Name)
			assert.Equal(t, "web-0", r.o.pods[0].Spec.Hostname)
			assert.Equal(t, "nginx", r.o.pods[0].Spec.Subdomain)
			assert.Equal(t, 1, countEvents(r.o, "SuccessfulCreate"), "web-0 is created once")
		}},
		{file: "24-init-containers.yaml", until: logSays("myapp-pod/init-myservice", "waiting for myservice"), check: func(t *testing.T, r *docRun) {
			p := r.o.pods[0]
			assert.Equal(t, v1.PodPending, p.Status.Phase, "Init:0/2 until the services exist, as on a kubelet")
			assert.NotNil(t, containerStatus(p, "init-myservice").State.Running)
			assert.NotNil(t, containerStatus(p, "init-mydb").State.Waiting)
			assert.NotNil(t, containerStatus(p, "myapp-container").State.Waiting)
			assert.Equal(t, r.ns, r.exec(t, "myapp-pod", "init-myservice", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"))
		}},
		{file: "25-active-deadline.yaml", until: phaseIs(v1.PodFailed), check: func(t *testing.T, r *docRun) {
			p := r.o.pods[0]
			assert.Equal(t, v1.PodFailed, p.Status.Phase)
			assert.Equal(t, "DeadlineExceeded", p.Status.Reason)
			assert.NotNil(t, containerStatus(p, "pi").State.Terminated, "the container is killed")
		}},
	}
	var mu sync.Mutex
	rows := map[string]string{}
	t.Cleanup(func() {
		var b strings.Builder
		for _, c := range cases {
			fmt.Fprintf(&b, "%s\n", rows[c.file])
		}
		t.Logf("documented manifests on podkit:\n%s", b.String())
	})
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			r := &docRun{h: h, ns: h.namespace(t, "docs-"+c.file[:2])}
			h.kubectl.run(t, "apply", "-n", r.ns, "-f", filepath.Join("testdata", "docmanifests", c.file))
			var err error
			r.o, err = waitDocOutcome(h.c.Admin(), r.ns, c.until)
			mu.Lock()
			rows[c.file] = fmt.Sprintf("%-32s %5.1fs %s", c.file, time.Since(start).Seconds(), r.o.summary())
			mu.Unlock()
			t.Logf("%s: %s\nlogs: %q\nevents:\n%s", c.file, r.o.summary(), r.o.logs, r.o.eventLines())
			require.NoError(t, err, "the outcome of %s", c.file)
			c.check(t, r)
		})
	}
}

// docNodes adds n untainted nodes of docPool to the cluster, sandboxed as
// the harness's are by default, and waits for them to be Ready.
func docNodes(t *testing.T, h *harness, n int) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.c.AddNode(testContextFor(t, clusterTimeout), clustertest.NodeOptions{
				Name:   fmt.Sprintf("%s-%d", docPool, i),
				Labels: map[string]string{poolLabel: docPool},
			})
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// hostPi runs the node's perl as 18-job-pi.yaml does, once: want is the
// first digits its pod prints, or, when the node's perl fails, "exit N:
// " and what it said.
var hostPi = func() func(t *testing.T) (want string, ok bool) {
	var once sync.Once
	var want string
	var ok bool
	return func(t *testing.T) (string, bool) {
		once.Do(func() {
			out, err := exec.CommandContext(testContextFor(t, docTimeout), "perl", "-Mbignum=bpi", "-wle", "print bpi(2000)").CombinedOutput()
			var exit *exec.ExitError
			switch {
			case err == nil:
				want, ok = "3.14159265358979323846264338327950288", true
			case errors.As(err, &exit):
				want = fmt.Sprintf("exit %d: %s", exit.ExitCode(), strings.TrimSpace(string(out)))
			default:
				want = err.Error()
			}
		})
		return want, ok
	}
}()

// waitDocOutcome observes namespace's pods until until holds.
func waitDocOutcome(cs kubernetes.Interface, namespace string, until func(docOutcome) bool) (docOutcome, error) {
	var o docOutcome
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, docTimeout, true, func(ctx context.Context) (bool, error) {
		seen, err := observe(ctx, cs, namespace)
		if err != nil {
			return false, nil // retried until the deadline; o is the last seen
		}
		o = seen
		return until(o), nil
	})
	return o, err
}

// observe reads namespace's pods, their containers' logs and the
// namespace's events.
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
	o.events = events.Items
	return o, nil
}

// exec runs command in the pod's container with kubectl exec and returns
// its output, trimmed of the last newline.
func (r *docRun) exec(t *testing.T, pod, container string, command ...string) string {
	t.Helper()
	out := r.h.kubectl.run(t, append([]string{"exec", "-n", r.ns, pod, "-c", container, "--"}, command...)...)
	return strings.TrimSuffix(out, "\n")
}

// jobComplete fails t unless the Job name has its Complete condition.
func (r *docRun) jobComplete(t *testing.T, name string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		job, err := r.h.c.Admin().BatchV1().Jobs(r.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = fmt.Sprintf("%+v", job.Status)
		for _, c := range job.Status.Conditions {
			if c.Type == "Complete" && c.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "Job %s completes; last status: %s", name, last)
}

// summary is one line: each pod's phase (reason) and containers, then the
// reasons of the Warning events.
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
	var warnings []string
	for _, e := range o.events {
		if e.Type == v1.EventTypeWarning && !slices.Contains(warnings, e.Reason) {
			warnings = append(warnings, e.Reason)
		}
	}
	if len(warnings) > 0 {
		out += " warnings: " + strings.Join(warnings, ",")
	}
	return out
}

// eventLines is the events, one a line, for failure messages.
func (o docOutcome) eventLines() string {
	var b strings.Builder
	for _, e := range o.events {
		fmt.Fprintf(&b, "  %s %s/%s %s: %s (x%d)\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, max(e.Count, 1))
	}
	return b.String()
}

// containerState is a container's state in a few words.
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

// containerStatus returns the status of the pod's (init) container name,
// zero if it has none.
func containerStatus(p v1.Pod, name string) v1.ContainerStatus {
	for _, c := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if c.Name == name {
			return c
		}
	}
	return v1.ContainerStatus{}
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

// phaseIs: a pod is in phase.
func phaseIs(phase v1.PodPhase) func(docOutcome) bool {
	return func(o docOutcome) bool {
		return slices.ContainsFunc(o.pods, func(p v1.Pod) bool { return p.Status.Phase == phase })
	}
}

// allOf holds when every one of conds does: a log line comes before the
// status that the pod runs is written, more so on a loaded machine.
func allOf(conds ...func(docOutcome) bool) func(docOutcome) bool {
	return func(o docOutcome) bool {
		for _, c := range conds {
			if !c(o) {
				return false
			}
		}
		return true
	}
}

// readyPods: n pods, each Running and Ready.
func readyPods(n int) func(docOutcome) bool {
	return func(o docOutcome) bool {
		if len(o.pods) != n {
			return false
		}
		for _, p := range o.pods {
			if p.Status.Phase != v1.PodRunning || !slices.ContainsFunc(p.Status.Conditions, func(c v1.PodCondition) bool {
				return c.Type == v1.PodReady && c.Status == v1.ConditionTrue
			}) {
				return false
			}
		}
		return true
	}
}

// logSays: a log of key holds text.
func logSays(key, text string) func(docOutcome) bool {
	return func(o docOutcome) bool {
		return slices.ContainsFunc(o.matching(key), func(l string) bool { return strings.Contains(l, text) })
	}
}

// logHas fails t unless a log of key holds each of texts.
func logHas(t *testing.T, o docOutcome, key string, texts ...string) {
	t.Helper()
	logs := o.matching(key)
	require.NotEmpty(t, logs, "a log of %s", key)
	for _, text := range texts {
		assert.True(t, slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, text) }), "%s says %q: %q", key, text, logs)
	}
}

// waitingIn: a container of a pod waits with one of reasons.
func waitingIn(reasons ...string) func(docOutcome) bool {
	return func(o docOutcome) bool {
		return slices.ContainsFunc(o.pods, func(p v1.Pod) bool { return podWaitsIn(p, reasons) })
	}
}

// allWaitingIn: n pods, each with a container waiting with one of
// reasons.
func allWaitingIn(n int, reasons ...string) func(docOutcome) bool {
	return func(o docOutcome) bool {
		return len(o.pods) == n && !slices.ContainsFunc(o.pods, func(p v1.Pod) bool { return !podWaitsIn(p, reasons) })
	}
}

func podWaitsIn(p v1.Pod, reasons []string) bool {
	return slices.ContainsFunc(p.Status.ContainerStatuses, func(c v1.ContainerStatus) bool {
		return c.State.Waiting != nil && slices.Contains(reasons, c.State.Waiting.Reason)
	})
}

// refusedProgram checks a manifest (of restartPolicy Always) whose
// image's program the host lacks: each pod's container waits with a
// message, the start's Failed event names the program, and each pod is
// Running, the kubelet's phase for a pod whose container exited and is to
// restart.
func refusedProgram(program string) func(*testing.T, *docRun) {
	return func(t *testing.T, r *docRun) {
		t.Helper()
		waitsNotFailed(t, r.o)
		for _, p := range r.o.pods {
			assert.Equal(t, v1.PodRunning, p.Status.Phase, p.Name)
		}
		eventSeen(t, r, "Failed", program)
	}
}

// refusedCommand checks a manifest of an image whose command the node
// cannot resolve: its container waits in CreateContainerConfigError with
// a Failed event, and its pod is Pending (no container ever started).
func refusedCommand(t *testing.T, r *docRun) {
	t.Helper()
	waitsNotFailed(t, r.o)
	for _, p := range r.o.pods {
		assert.Equal(t, v1.PodPending, p.Status.Phase, p.Name)
	}
	eventSeen(t, r, "Failed", "")
}

// waitsNotFailed fails t if a pod Failed or a waiting container has no
// message.
func waitsNotFailed(t *testing.T, o docOutcome) {
	t.Helper()
	for _, p := range o.pods {
		assert.NotEqual(t, v1.PodFailed, p.Status.Phase, p.Name)
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				assert.NotEmpty(t, w.Message, "%s/%s waits in %s with a message", p.Name, c.Name, w.Reason)
			}
		}
	}
}

// eventSeen fails t unless an event of r's namespace has reason and a
// message holding msg: in r's outcome, or listed within eventPatience
// after it (an event is written apart from the status the outcome waited
// for, by a recorder of its own, and may come after it on a loaded
// machine).
func eventSeen(t *testing.T, r *docRun, reason, msg string) {
	t.Helper()
	match := func(e v1.Event) bool { return e.Reason == reason && strings.Contains(e.Message, msg) }
	if slices.ContainsFunc(r.o.events, match) {
		return
	}
	var last []v1.Event
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, eventPatience, true, func(ctx context.Context) (bool, error) {
		events, err := r.h.c.Admin().CoreV1().Events(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		last = events.Items
		return slices.ContainsFunc(last, match), nil
	})
	if err != nil {
		o := r.o
		o.events = last
		t.Errorf("no event %s with %q within %v of the outcome; events:\n%s", reason, msg, eventPatience, o.eventLines())
	}
}

// countEvents is how many times the events of reason happened.
func countEvents(o docOutcome, reason string) int {
	n := 0
	for _, e := range o.events {
		if e.Reason == reason {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// containerDone: a container name has terminated.
func containerDone(name string) func(docOutcome) bool {
	return func(o docOutcome) bool {
		return slices.ContainsFunc(o.pods, func(p v1.Pod) bool { return containerStatus(p, name).State.Terminated != nil })
	}
}

// restarted: the pod's first container restarted n times or more.
func restarted(pod string, n int32) func(docOutcome) bool {
	return func(o docOutcome) bool {
		return slices.ContainsFunc(o.pods, func(p v1.Pod) bool {
			return p.Name == pod && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= n
		})
	}
}
