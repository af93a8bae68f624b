package kubeletserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

var measuredAt = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// onePod is a pod's stats as a runtime reports them: one container
// measured, one whose memory is not.
func onePod() []statsapi.PodStats {
	at := metav1.NewTime(measuredAt)
	return []statsapi.PodStats{{
		PodRef:    statsapi.PodReference{Name: "web", Namespace: "ns", UID: "uid-web"},
		StartTime: metav1.NewTime(measuredAt.Add(-time.Hour)),
		CPU:       &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To[uint64](3e9)},
		Memory:    &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr.To[uint64](3 << 20)},
		Containers: []statsapi.ContainerStats{
			{Name: "app", StartTime: metav1.NewTime(measuredAt.Add(-time.Hour)),
				CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To[uint64](2e9)},
				Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr.To[uint64](2 << 20), RSSBytes: ptr.To[uint64](1 << 20)},
				Rootfs: &statsapi.FsStats{Time: at, UsedBytes: ptr.To[uint64](4096)}},
			{Name: "sidecar", StartTime: metav1.NewTime(measuredAt.Add(-time.Minute)),
				CPU: &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To[uint64](1e9)}},
		},
	}}
}

func TestStatsSummary(t *testing.T) {
	n := startNode(t, kubeletserver.Options{Stats: kubeletserver.StatsProviderFunc(func(context.Context) ([]statsapi.PodStats, error) {
		return onePod(), nil
	})})
	code, body := get(t, n.admin(), n.url+"/stats/summary", "")
	require.Equal(t, http.StatusOK, code, body)
	var sum statsapi.Summary
	require.NoError(t, json.Unmarshal([]byte(body), &sum))
	assert.Equal(t, "node-a", sum.Node.NodeName)
	require.NotNil(t, sum.Node.CPU, "the node's CPU, from /proc/stat")
	require.NotNil(t, sum.Node.CPU.UsageCoreNanoSeconds)
	assert.Positive(t, *sum.Node.CPU.UsageCoreNanoSeconds)
	require.NotNil(t, sum.Node.Memory, "the node's memory, from /proc/meminfo")
	assert.Positive(t, *sum.Node.Memory.WorkingSetBytes)
	assert.LessOrEqual(t, *sum.Node.Memory.WorkingSetBytes, *sum.Node.Memory.UsageBytes)
	assert.True(t, sum.Node.StartTime.Before(&metav1.Time{Time: time.Now()}), "boot time")
	want, err := json.Marshal(onePod())
	require.NoError(t, err)
	gotPods, err := json.Marshal(sum.Pods)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(gotPods))

	// A second reading has the CPU rate since the first.
	code, body = get(t, n.admin(), n.url+"/stats/summary?only_cpu_and_memory=true", "")
	require.Equal(t, http.StatusOK, code, body)
	sum = statsapi.Summary{}
	require.NoError(t, json.Unmarshal([]byte(body), &sum))
	assert.NotNil(t, sum.Node.CPU.UsageNanoCores)
	assert.Nil(t, sum.Pods[0].Containers[0].Rootfs, "only CPU and memory")
	assert.NotNil(t, sum.Pods[0].Containers[0].Memory)

	code, body = get(t, n.admin(), n.url+"/stats/summary?only_cpu_and_memory=perhaps", "")
	assert.Equal(t, http.StatusBadRequest, code, body)
	code, body = get(t, n.client(), n.url+"/stats/summary", tokenScraper)
	assert.Equal(t, http.StatusOK, code, "nodes/stats is enough: %s", body)
	code, body = get(t, n.client(), n.url+"/stats/summary", tokenNobody)
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, "subresource(s)=[stats]")
}

func TestResourceMetrics(t *testing.T) {
	fail := false
	n := startNode(t, kubeletserver.Options{Stats: kubeletserver.StatsProviderFunc(func(context.Context) ([]statsapi.PodStats, error) {
		if fail {
			return nil, errors.New("the runtime is down")
		}
		return onePod(), nil
	})})
	scrape := func() map[string]*model.Sample {
		code, body := get(t, n.client(), n.url+"/metrics/resource", tokenScraper)
		require.Equal(t, http.StatusOK, code, body)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
		require.NoError(t, err)
		vec, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, mapToSlice(fams)...)
		require.NoError(t, err)
		out := map[string]*model.Sample{}
		for _, s := range vec {
			out[s.Metric.String()] = s
		}
		return out
	}
	got := scrape()
	value := func(series string) float64 {
		s, ok := got[series]
		require.True(t, ok, "%s is exported; got %v", series, got)
		return float64(s.Value)
	}
	assert.Positive(t, value("node_cpu_usage_seconds_total"))
	assert.Positive(t, value("node_memory_working_set_bytes"))
	assert.Equal(t, 2.0, value(`container_cpu_usage_seconds_total{container="app", namespace="ns", pod="web"}`))
	assert.Equal(t, 1.0, value(`container_cpu_usage_seconds_total{container="sidecar", namespace="ns", pod="web"}`))
	assert.Equal(t, float64(2<<20), value(`container_memory_working_set_bytes{container="app", namespace="ns", pod="web"}`))
	assert.NotContains(t, got, `container_memory_working_set_bytes{container="sidecar", namespace="ns", pod="web"}`, "not measured, not zero")
	assert.Equal(t, float64(measuredAt.Add(-time.Hour).Unix()), value(`container_start_time_seconds{container="app", namespace="ns", pod="web"}`))
	assert.Equal(t, 3.0, value(`pod_cpu_usage_seconds_total{namespace="ns", pod="web"}`))
	assert.Equal(t, float64(3<<20), value(`pod_memory_working_set_bytes{namespace="ns", pod="web"}`))
	assert.Equal(t, 0.0, value("resource_scrape_error"))
	assert.Equal(t, 0.0, value("scrape_error"))
	assert.Equal(t, model.TimeFromUnixNano(measuredAt.UnixNano()), got[`pod_cpu_usage_seconds_total{namespace="ns", pod="web"}`].Timestamp,
		"samples carry the time they were measured")

	fail = true
	got = scrape()
	assert.Equal(t, 1.0, value("resource_scrape_error"))
	assert.Positive(t, value("node_cpu_usage_seconds_total"), "the node's figures stay")
	assert.NotContains(t, got, `pod_cpu_usage_seconds_total{namespace="ns", pod="web"}`)
	code, body := get(t, n.admin(), n.url+"/stats/summary", "")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "the runtime is down")
}

func mapToSlice[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestPodsAndRunningPods(t *testing.T) {
	bound := []*v1.Pod{testPod("ns", "a", "c"), testPod("ns", "b", "c")}
	running := []*v1.Pod{testPod("ns", "a", "c")}
	n := startNode(t, kubeletserver.Options{
		BoundPods:   func() []*v1.Pod { return bound },
		RunningPods: func(context.Context) ([]*v1.Pod, error) { return running, nil },
	})
	for path, want := range map[string][]string{"/pods": {"a", "b"}, "/runningpods/": {"a"}} {
		code, body := get(t, n.admin(), n.url+path, "")
		require.Equal(t, http.StatusOK, code, body)
		var list v1.PodList
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		assert.Equal(t, "PodList", list.Kind)
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		assert.Equal(t, want, names, path)
		code, body = get(t, n.client(), n.url+path, tokenScraper)
		assert.Equal(t, http.StatusForbidden, code, body)
		assert.Contains(t, body, "subresource(s)=[pods proxy]")
	}
}
