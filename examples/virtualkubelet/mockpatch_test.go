package virtualkubelet_test

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scale benchmark's patches of virtual-kubelet's source (mockBuild).

// vkSource is the text of file (slash-separated, in virtual-kubelet's
// module) in the module cache.
func vkSource(t *testing.T, file string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(vkModuleDir(t), filepath.FromSlash(file)))
	require.NoError(t, err)
	return string(src)
}

// requireParses fails unless src is a Go file.
func requireParses(t *testing.T, name, src string) {
	t.Helper()
	_, err := parser.ParseFile(token.NewFileSet(), name, src, parser.AllErrors)
	require.NoError(t, err, "the patched %s", name)
}

func TestMockPatchesApplyToVirtualKubeletsSource(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		src := vkSource(t, "node/nodeutil/client.go")
		patched, err := patchMockClient(src, 100, 200)
		require.NoError(t, err)
		requireParses(t, "client.go", patched)
		assert.Contains(t, patched, "config.QPS, config.Burst = 100, 200")
	})
	t.Run("queues", func(t *testing.T) {
		src := vkSource(t, "node/podcontroller.go")
		patched, err := patchMockQueues(src)
		require.NoError(t, err)
		requireParses(t, "podcontroller.go", patched)
		assert.Equal(t, 3, strings.Count(patched, "podkitBenchRateLimiter()"))
		assert.NotContains(t, patched, "DefaultTypedControllerRateLimiter")
		requireParses(t, "zz_podkit_bench_limiter.go", mockQueueLimiter(queueLimits{qps: 1000, burst: 1000}))
	})
	t.Run("pods lock", func(t *testing.T) {
		src := vkSource(t, mockProviderDir+"/mock.go")
		patched, err := patchMockPodsLock(src)
		require.NoError(t, err)
		requireParses(t, "mock.go", patched)
		requireParses(t, "zz_podkit_pods_lock.go", mockPodsLockFile)
		// Three stores or deletes under the write lock, one lookup under
		// the read lock, three loops over the copy.
		assert.Equal(t, 3, strings.Count(patched, "p.podsMu.Lock()"))
		assert.Equal(t, 4, strings.Count(patched, "p.podsMu.Unlock()"), "DeletePod unlocks on both of its ways out")
		assert.Equal(t, 1, strings.Count(patched, "p.podsMu.RLock()"))
		assert.Equal(t, 3, strings.Count(patched, "range p.podkitPods()"))
		// Nothing is removed: taking the added lines out gives the source back.
		var kept []string
		for line := range strings.Lines(patched) {
			if !strings.Contains(line, "podsMu") {
				kept = append(kept, line)
			}
		}
		unpatched := strings.ReplaceAll(strings.Join(kept, ""), "range p.podkitPods()", "range p.pods")
		unpatched = strings.Replace(unpatched, "\tpod, ok := p.pods[key]\n\tif ok {\n", "\tif pod, ok := p.pods[key]; ok {\n", 1)
		assert.Equal(t, src, unpatched)
	})
}

func TestMockPatchesFailOnUnexpectedSource(t *testing.T) {
	client := vkSource(t, "node/nodeutil/client.go")
	queues := vkSource(t, "node/podcontroller.go")
	mock := vkSource(t, mockProviderDir+"/mock.go")
	for name, patch := range map[string]func() (string, error){
		"client without its return": func() (string, error) {
			return patchMockClient(strings.Replace(client, "\treturn kubernetes.NewForConfig(config)\n", "\treturn kubernetes.NewForConfigAndClient(config, nil)\n", 1), 1, 1)
		},
		"client with two returns": func() (string, error) {
			return patchMockClient(client+"\treturn kubernetes.NewForConfig(config)\n", 1, 1)
		},
		"queues with a fourth default": func() (string, error) {
			return patchMockQueues(queues + "// workqueue.DefaultTypedControllerRateLimiter[any]()\n")
		},
		"queues renamed": func() (string, error) {
			return patchMockQueues(strings.ReplaceAll(queues, "DefaultTypedControllerRateLimiter", "DefaultControllerRateLimiter"))
		},
		"mock with a new use of its pods": func() (string, error) {
			return patchMockPodsLock(mock + "\nfunc (p *MockProvider) count() int { return len(p.pods) }\n")
		},
		"mock with GetPod rewritten": func() (string, error) {
			return patchMockPodsLock(strings.Replace(mock, "\tif pod, ok := p.pods[key]; ok {\n", "\tif pod, found := p.pods[key]; found {\n", 1))
		},
		"mock with its field realigned": func() (string, error) {
			return patchMockPodsLock(strings.Replace(mock, "\tpods               map[string]*v1.Pod\n", "\tpods map[string]*v1.Pod\n", 1))
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := patch()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "virtual-kubelet's source is not the text the patch was written for")
		})
	}
}

// mockRaceTest is a test added to the copy of the mock provider's package:
// goroutines that each create, read, list, update and delete their own
// pods through every method that uses the pods map, at once.
const mockRaceTest = `package mock

import (
	"context"
	"fmt"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodkitPodsMapConcurrently(t *testing.T) {
	ctx := context.Background()
	p, err := NewMockProviderMockConfig(MockConfig{}, "node", "linux", "10.0.0.1", 10250)
	if err != nil {
		t.Fatal(err)
	}
	p.NotifyPods(ctx, func(*v1.Pod) {})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				pod := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%d-%d", g, i)},
					Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx"}}},
				}
				err := p.CreatePod(ctx, pod)
				if err == nil {
					_, err = p.GetPod(ctx, pod.Namespace, pod.Name)
				}
				if err == nil {
					_, err = p.GetPodStatus(ctx, pod.Namespace, pod.Name)
				}
				if err == nil {
					_, err = p.GetPods(ctx)
				}
				if err == nil {
					_, err = p.GetStatsSummary(ctx)
				}
				if err == nil {
					_, err = p.GetMetricsResource(ctx)
				}
				if err == nil {
					err = p.UpdatePod(ctx, pod.DeepCopy())
				}
				if err == nil {
					err = p.DeletePod(ctx, pod.DeepCopy())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
`

// runMockRaceTest runs mockRaceTest with the race detector in a copy of
// virtual-kubelet's module patched as o says, returning go test's output
// and error.
func runMockRaceTest(t *testing.T, o mockBuild) (string, error) {
	t.Helper()
	modFile := mockModule(t, o)
	dir := filepath.Join(filepath.Dir(modFile), "virtual-kubelet", filepath.FromSlash(mockProviderDir))
	writeFile(t, filepath.Join(dir, "zz_podkit_race_test.go"), mockRaceTest)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-race", "-count=1", "-run", "^TestPodkitPodsMapConcurrently$", "-modfile", modFile, vkModule+"/"+mockProviderDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestMockPodsLockEndsTheMocksDataRace runs a test of concurrent calls on
// the mock provider's pods map with the race detector, in virtual-kubelet's
// source as it is (which races) and with patchMockPodsLock (which does
// not). It skips in -short: it builds virtual-kubelet's packages twice
// with -race.
func TestMockPodsLockEndsTheMocksDataRace(t *testing.T) {
	if testing.Short() {
		t.Skip("virtualkubelet: builds virtual-kubelet's mock provider with -race twice; not in -short")
	}
	t.Run("unpatched races", func(t *testing.T) {
		out, err := runMockRaceTest(t, mockBuild{})
		require.Error(t, err, "go test -race of the unpatched mock provider passed:\n%s", out)
		assert.Regexp(t, `WARNING: DATA RACE|concurrent map (read and map write|writes)`, out)
	})
	t.Run("patched does not", func(t *testing.T) {
		out, err := runMockRaceTest(t, mockBuild{podsLock: true})
		require.NoError(t, err, "go test -race of the patched mock provider:\n%s", out)
	})
}
