package virtualkubelet_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
)

// TestStatsAndResourceMetricsComeFromTheBackend: the stats summary and the
// resource metrics carry the backend's per-container figures, summed per
// pod and for the node, for the running pods only, under the kubelet's
// metric names.
func TestStatsAndResourceMetricsComeFromTheBackend(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC))
	d := newDirectWith(t, simcloud.Options{Clock: clock}, vk.Options{NodeName: "vk-node"})
	web := newPod("web", "uid-web")
	web.Spec.Containers = append(web.Spec.Containers, v1.Container{Name: "side", Image: "busybox"})
	web.Spec.Containers[0].Resources.Requests = v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	require.NoError(t, d.provider.CreatePod(d.ctx, web))
	d.eventually("web to run", func() bool { return d.remote("uid-web").Running() })
	require.NoError(t, d.cloud.SetUsage("uid-web", "side", simcloud.Usage{NanoCores: 5_000_000, MemoryWorkingSet: 1 << 20}))
	clock.Step(10 * time.Second)

	sum, err := d.provider.GetStatsSummary(d.ctx)
	require.NoError(t, err)
	assert.Equal(t, "vk-node", sum.Node.NodeName)
	require.Len(t, sum.Pods, 1)
	ps := sum.Pods[0]
	assert.Equal(t, "uid-web", ps.PodRef.UID)
	require.Len(t, ps.Containers, 2)
	app, side := ps.Containers[0], ps.Containers[1]
	assert.Equal(t, "app", app.Name)
	assert.EqualValues(t, 250_000_000, *app.CPU.UsageNanoCores, "from the container's request")
	assert.EqualValues(t, 2_500_000_000, *app.CPU.UsageCoreNanoSeconds, "250m for 10s")
	assert.EqualValues(t, 64<<20, *app.Memory.WorkingSetBytes)
	assert.EqualValues(t, 5_000_000, *side.CPU.UsageNanoCores, "as SetUsage set it")
	assert.EqualValues(t, 1<<20, *side.Memory.WorkingSetBytes)
	assert.EqualValues(t, 255_000_000, *ps.CPU.UsageNanoCores, "summed per pod")
	assert.EqualValues(t, 65<<20, *ps.Memory.WorkingSetBytes)
	assert.EqualValues(t, 65<<20, *sum.Node.Memory.WorkingSetBytes, "and for the node")
	assert.Equal(t, clock.Now(), ps.CPU.Time.Time)

	mfs, err := d.provider.GetMetricsResource(d.ctx)
	require.NoError(t, err)
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		require.NoError(t, enc.Encode(mf))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(&buf)
	require.NoError(t, err, "valid Prometheus text:\n%s", buf.String())
	value := func(name string, labels ...string) float64 {
		t.Helper()
		mf := parsed[name]
		require.NotNil(t, mf, "family %s", name)
	metrics:
		for _, m := range mf.Metric {
			if len(m.Label) != len(labels)/2 {
				continue
			}
			for i, l := range m.Label {
				if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
					continue metrics
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
		t.Fatalf("no sample of %s with labels %v", name, labels)
		return 0
	}
	assert.InDelta(t, 2.5, value(vk.MetricContainerCPU, "namespace", testNS, "pod", "web", "container", "app"), 1e-9)
	assert.InDelta(t, 0.05, value(vk.MetricContainerCPU, "namespace", testNS, "pod", "web", "container", "side"), 1e-9)
	assert.InDelta(t, 2.55, value(vk.MetricPodCPU, "namespace", testNS, "pod", "web"), 1e-9)
	assert.InDelta(t, float64(65<<20), value(vk.MetricPodMemory, "namespace", testNS, "pod", "web"), 0)
	assert.InDelta(t, 2.55, value(vk.MetricNodeCPU), 1e-9)
	assert.InDelta(t, float64(65<<20), value(vk.MetricNodeMemory), 0)
	assert.InDelta(t, float64(clock.Now().Add(-10*time.Second).Unix()), value(vk.MetricContainerStartTime, "namespace", testNS, "pod", "web", "container", "app"), 0)
	assert.Zero(t, value(vk.MetricResourceScrapeError))

	// A failing backend is a scrape error, not a failed scrape.
	d.cloud.InjectError(simcloud.OpUsage, "", 1)
	mfs, err = d.provider.GetMetricsResource(d.ctx)
	require.NoError(t, err)
	require.Len(t, mfs, 1)
	assert.Equal(t, vk.MetricResourceScrapeError, mfs[0].GetName())
	assert.EqualValues(t, 1, mfs[0].Metric[0].Gauge.GetValue())
	d.cloud.InjectError(simcloud.OpUsage, "", 1)
	_, err = d.provider.GetStatsSummary(d.ctx)
	assert.ErrorIs(t, err, simcloud.ErrUnavailable)

	// A stopped pod has no figures any more.
	require.NoError(t, d.provider.DeletePod(d.ctx, web))
	d.eventually("web to stop", func() bool { return !d.remote("uid-web").Running() })
	d.eventually("web to leave the summary", func() bool {
		sum, err := d.provider.GetStatsSummary(d.ctx)
		require.NoError(t, err)
		return len(sum.Pods) == 0
	})
}
