package lifecycle_test

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
)

// logLines is a funcr sink that keeps the lines of level 0 (what an agent
// logs by default).
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, args)
}

func (l *logLines) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, `"error"=`) {
			out = append(out, line)
		}
	}
	return out
}

// Issue 11: Dispatch recorded an event for a pod without a UID while the
// HandlePod* methods only logged it, and Dispatch dropped a removal's
// unusable pods without a word. One rule now holds for every entry point:
// each unusable pod is logged as an error and, unless it is nil, recorded
// as a FailedValidation Warning event; the other pods are handled. Issue
// 19: the Config logged the same drop at Info, and a pod from a source went
// through the rules three times (Config, Dispatch, the HandlePod* skeleton),
// so it was reported up to three times: now each path reports it once.
func TestUnusablePodsOneRuleForEveryEntryPoint(t *testing.T) {
	entryPoints := map[string]func(h *lifecycle.SyncLoop, e *env, pods []*v1.Pod){}
	for _, op := range []podconfig.PodOperation{podconfig.OpAdd, podconfig.OpUpdate, podconfig.OpDelete, podconfig.OpRemove, podconfig.OpReconcile} {
		entryPoints["Dispatch "+op.String()] = func(h *lifecycle.SyncLoop, e *env, pods []*v1.Pod) {
			require.NoError(t, h.Dispatch(e.ctx, podconfig.PodUpdate{Op: op, Source: mirror.ApiserverSource, Pods: pods}))
		}
	}
	entryPoints["HandlePodAdditions"] = func(h *lifecycle.SyncLoop, e *env, pods []*v1.Pod) { h.HandlePodAdditions(e.ctx, pods) }
	entryPoints["HandlePodUpdates"] = func(h *lifecycle.SyncLoop, e *env, pods []*v1.Pod) { h.HandlePodUpdates(e.ctx, pods) }
	entryPoints["HandlePodRemoves"] = func(h *lifecycle.SyncLoop, e *env, pods []*v1.Pod) { h.HandlePodRemoves(e.ctx, pods) }
	entryPoints["HandlePodReconcile"] = func(h *lifecycle.SyncLoop, e *env, pods []*v1.Pod) { h.HandlePodReconcile(e.ctx, pods) }
	entryPoints["Config.SetPods"] = func(_ *lifecycle.SyncLoop, e *env, pods []*v1.Pod) {
		require.NoError(t, e.cfg.SetPods(e.ctx, mirror.ApiserverSource, pods))
		synctest.Wait()
	}

	for name, call := range entryPoints {
		t.Run(name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				logs := &logLines{}
				e := newAgentEnv(t, func(o *lifecycle.AgentOptions[struct{}]) { o.Logger = funcr.New(logs.add, funcr.Options{}) })
				e.start()
				call(e.h, e, []*v1.Pod{nil, apiPod("", "nouid", 0)})

				assert.Equal(t, []string{podconfig.ReasonFailedValidation + " nouid_default"}, e.events.reasons(),
					"one Warning event, for the pod that is not nil")
				evs := e.events.all()
				require.Len(t, evs, 1)
				assert.Equal(t, v1.EventTypeWarning, evs[0].Type)
				assert.Contains(t, evs[0].Message, "has no UID")
				errs := logs.errors()
				require.Len(t, errs, 2, "one error line per unusable pod: %v", logs.lines)
				assert.Contains(t, errs[0], "is nil")
				assert.Contains(t, errs[1], "has no UID")
				assert.Empty(t, e.workers.Pods(), "nothing reached the workers")
			})
		})
	}
}
