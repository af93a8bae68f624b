package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// demoFS holds the demo's pods: demo/api are the pods a (fake) API server
// binds to the node, demo/static the static pod manifests.
//
//go:embed demo
var demoFS embed.FS

// demoGrace is the grace period the demo deletes the graceful pod with.
const demoGrace = 5

// demoAPIPods decodes the demo's API pods, in file name order.
func demoAPIPods() ([]*v1.Pod, error) {
	names, err := fs.Glob(demoFS, "demo/api/*.yaml")
	if err != nil {
		return nil, err
	}
	var pods []*v1.Pod
	for _, name := range names {
		data, err := demoFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		pod := &v1.Pod{}
		if err := yaml.UnmarshalStrict(data, pod); err != nil {
			return nil, fmt.Errorf("demo pod %s: %w", name, err)
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// writeDemoManifests writes the demo's static pod manifests into dir,
// replacing what was there.
func writeDemoManifests(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("demo manifests: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo manifests: %w", err)
	}
	names, err := fs.Glob(demoFS, "demo/static/*.yaml")
	if err != nil {
		return err
	}
	for _, name := range names {
		data, err := demoFS.ReadFile(name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(name)), data, 0o644); err != nil {
			return fmt.Errorf("demo manifests: %w", err)
		}
	}
	return nil
}

// preflightDemo checks that every command of the demo can be found in
// rt, so a machine without them gets one clear error instead of failing
// pods.
func preflightDemo(rt *processruntime.Runtime) error {
	pods, err := demoAPIPods()
	if err != nil {
		return err
	}
	for _, pod := range pods {
		for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if _, err := rt.LookPath(c.Command[0]); err != nil {
				return fmt.Errorf("the demo needs %q, which is missing: %w", c.Command[0], err)
			}
		}
	}
	return nil
}

// demo is the demo script and what it plays on: the fake API server it
// binds pods with, and the agent's records, runtime and workers it watches.
type demo struct {
	api      *fakeAPIServer
	records  *podRecords
	rt       *processruntime.Runtime
	workers  *podworker.PodWorkers[processruntime.PodStatus]
	say      func(format string, args ...any)
	nodeName string
	timeout  time.Duration
}

// play plays the demo script: the API server binds five pods to the
// node while the manifest source delivers a static pod; once the graceful
// pod runs it is deleted with a grace period of demoGrace seconds and, when
// stopped, removed; the script ends when the job and the crashing pod have
// finished and the static pod's mirror pod exists. The caller then shuts
// the node down, which terminates the long-running pods. It returns an
// error when a step does not happen within the demo timeout.
func (d *demo) play(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, d.timeout, fmt.Errorf("the demo stalled: not done after %v", d.timeout))
	defer cancel()
	pods, err := demoAPIPods()
	if err != nil {
		return err
	}
	for _, p := range pods {
		p.Spec.NodeName = d.nodeName
	}
	d.api.Create(pods...)

	step := func(what string, cond func() bool) error {
		if err := d.records.waitUntil(ctx, cond); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		return nil
	}
	graceful, _ := d.api.Pod("graceful")
	if err := step("the graceful pod to run", func() bool {
		// Its first line is written once its SIGTERM trap is set.
		return logContains(d.rt, graceful.UID, "worker", "graceful: working")
	}); err != nil {
		return err
	}
	d.say("demo: deleting default/graceful with a grace period of %ds", demoGrace)
	d.api.Delete("graceful", demoGrace)
	if err := step("the graceful pod to stop", d.records.stageReached(graceful.UID, podworker.StageTerminated)); err != nil {
		return err
	}
	d.api.Remove("graceful")

	job, _ := d.api.Pod("job")
	crashy, _ := d.api.Pod("crashy")
	if err := step("the job to finish", d.records.stageReached(job.UID, podworker.StageTerminated)); err != nil {
		return err
	}
	if err := step("the crashing pod to succeed", d.records.stageReached(crashy.UID, podworker.StageTerminated)); err != nil {
		return err
	}
	if err := step("the static pod's mirror pod", func() bool {
		for _, info := range d.workers.Pods() {
			if info.Static && info.MirrorPod != nil {
				return true
			}
		}
		return false
	}); err != nil {
		return err
	}
	d.say("demo: done; the web pods run until the node shuts down")
	return nil
}

// logContains reports whether the log of the pod's container (its
// current instance) in rt holds text (false while there is no log yet).
func logContains(rt *processruntime.Runtime, uid types.UID, container, text string) bool {
	log, _ := containerLog(rt, uid, container)
	return strings.Contains(log, text)
}

// containerLog returns the log of the current instance of the pod's
// container in rt.
func containerLog(rt *processruntime.Runtime, uid types.UID, container string) (string, error) {
	var log strings.Builder
	err := rt.ReadLogs(context.Background(), uid, container, processruntime.LogOptions{}, &log)
	return log.String(), err
}
