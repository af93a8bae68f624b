package event

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestNilRecorderFuncDropsEvents(t *testing.T) {
	var f RecorderFunc
	require.NotPanics(t, func() { f.Eventf(&v1.Pod{}, v1.EventTypeNormal, "R", "m") })
}

func TestOrDiscard(t *testing.T) {
	require.Equal(t, Discard, OrDiscard(nil))
	var got string
	r := RecorderFunc(func(_ runtime.Object, _, reason, _ string, _ ...any) { got = reason })
	OrDiscard(r).Eventf(&v1.Pod{}, v1.EventTypeNormal, "Kept", "")
	require.Equal(t, "Kept", got)
}
