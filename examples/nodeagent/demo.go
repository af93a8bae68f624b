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

// preflightDemo checks that every command of the demo can be found, so a
// machine without them gets one clear error instead of failing pods.
func (a *agent) preflightDemo() error {
	pods, err := demoAPIPods()
	if err != nil {
		return err
	}
	for _, pod := range pods {
		for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if _, err := a.rt.LookPath(c.Command[0]); err != nil {
				return fmt.Errorf("the demo needs %q, which is missing: %w", c.Command[0], err)
			}
		}
	}
	return nil
}

// playDemo plays the demo script: the API server binds five pods to the
// node while the manifest source delivers a static pod; once the graceful
// pod runs it is deleted with a grace period of demoGrace seconds and, when
// stopped, removed; the script ends when the job and the crashing pod have
// finished and the static pod's mirror pod exists. The caller then shuts
// the node down, which terminates the long-running pods. It returns an
// error when a step does not happen within the demo timeout.
func (a *agent) playDemo(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, a.opts.demoTimeout, fmt.Errorf("the demo stalled: not done after %v", a.opts.demoTimeout))
	defer cancel()
	pods, err := demoAPIPods()
	if err != nil {
		return err
	}
	for _, p := range pods {
		p.Spec.NodeName = a.opts.nodeName
	}
	a.api.Create(pods...)

	step := func(what string, cond func() bool) error {
		if err := a.waitUntil(ctx, cond); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		return nil
	}
	graceful, _ := a.api.Pod("graceful")
	if err := step("the graceful pod to run", func() bool {
		// Its first line is written once its SIGTERM trap is set.
		return a.logContains(graceful.UID, "worker", "graceful: working")
	}); err != nil {
		return err
	}
	a.say("demo: deleting default/graceful with a grace period of %ds", demoGrace)
	a.api.Delete("graceful", demoGrace)
	if err := step("the graceful pod to stop", a.stageReached(graceful.UID, podworker.StageTerminated)); err != nil {
		return err
	}
	a.api.Remove("graceful")

	job, _ := a.api.Pod("job")
	crashy, _ := a.api.Pod("crashy")
	if err := step("the job to finish", a.stageReached(job.UID, podworker.StageTerminated)); err != nil {
		return err
	}
	if err := step("the crashing pod to succeed", a.stageReached(crashy.UID, podworker.StageTerminated)); err != nil {
		return err
	}
	if err := step("the static pod's mirror pod", func() bool {
		for _, info := range a.workers.Pods() {
			if info.Static && info.MirrorPod != nil {
				return true
			}
		}
		return false
	}); err != nil {
		return err
	}
	a.say("demo: done; the web pods run until the node shuts down")
	return nil
}

// stageReached returns a condition: the worker of uid reached stage (it
// holds also once the worker is forgotten).
func (a *agent) stageReached(uid types.UID, stage podworker.Stage) func() bool {
	return func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		rec := a.pods[uid]
		return rec != nil && rec.maxStage >= stage
	}
}

// logContains reports whether the log of the pod's container (its
// current instance) holds text (false while there is no log yet).
func (a *agent) logContains(uid types.UID, container, text string) bool {
	log, _ := a.containerLog(uid, container)
	return strings.Contains(log, text)
}

// containerLog returns the log of the current instance of the pod's
// container.
func (a *agent) containerLog(uid types.UID, container string) (string, error) {
	var log strings.Builder
	err := a.rt.ReadLogs(context.Background(), uid, container, processruntime.LogOptions{}, &log)
	return log.String(), err
}
