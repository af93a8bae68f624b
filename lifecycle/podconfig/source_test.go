package podconfig_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/podconfig"
)

func TestNewSource(t *testing.T) {
	boom := errors.New("boom")
	src, err := podconfig.NewSource("mine", func(ctx context.Context, sink podconfig.PodSink) error {
		require.NoError(t, sink.SetPods(ctx, "mine", nil))
		return boom
	})
	require.NoError(t, err)
	assert.Equal(t, "mine", src.Source())
	var got []string
	sink := podconfig.PodSinkFunc(func(_ context.Context, source string, _ []*v1.Pod) error {
		got = append(got, source)
		return nil
	})
	assert.ErrorIs(t, src.Run(t.Context(), sink), boom)
	assert.Equal(t, []string{"mine"}, got)

	_, err = podconfig.NewSource("", func(context.Context, podconfig.PodSink) error { return nil })
	assert.ErrorContains(t, err, "podconfig: NewSource needs a source name")
	_, err = podconfig.NewSource("x", nil)
	assert.ErrorContains(t, err, "podconfig: NewSource needs a run function")
}

// The updates a Config makes say so, which lets the sync loop skip the
// rules the Config already applied; a literal update does not.
func TestUpdatesFromConfigSaySo(t *testing.T) {
	c, _ := newConfig(t)
	ups, err := c.Merge("api", []*v1.Pod{apiPod("a", "a", 0)})
	require.NoError(t, err)
	require.Len(t, ups, 1)
	assert.True(t, ups[0].FromConfig())
	ups, err = c.Merge("file", nil)
	require.NoError(t, err)
	require.Len(t, ups, 1, "the first empty snapshot of a source")
	assert.True(t, ups[0].FromConfig())
	assert.False(t, podconfig.PodUpdate{Op: podconfig.OpAdd, Source: "api"}.FromConfig())
}
