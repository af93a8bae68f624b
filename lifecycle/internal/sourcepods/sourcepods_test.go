package sourcepods_test

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/internal/sourcepods"
	"github.com/podkit/podkit/mirror"
)

func pod(uid types.UID, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, Name: name, Namespace: "default"}}
}

type drops []string

func (d *drops) add(i int, p *v1.Pod, reason string) {
	name := "<nil>"
	if p != nil {
		name = mirror.PodFullName(p)
	}
	*d = append(*d, name+": "+reason)
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, mirror.PodFullName(p))
	}
	return out
}

func TestIdentified(t *testing.T) {
	var d drops
	got := sourcepods.Identified([]*v1.Pod{pod("a", "a"), nil, pod("", "b"), pod("a", "c")}, d.add)
	assert.Equal(t, []string{"a_default", "c_default"}, names(got), "duplicates are not Identified's business")
	assert.Equal(t, drops{"<nil>: pod 1 of the batch is nil", "b_default: pod b_default has no UID"}, d)
}

func TestValid(t *testing.T) {
	fakeMirror := pod("m", "m")
	fakeMirror.Annotations = map[string]string{mirror.ConfigMirrorAnnotationKey: "h"}
	batch := []*v1.Pod{pod("a", "a"), nil, pod("", "b"), pod("c", "a"), pod("a", "d"), fakeMirror}

	var d drops
	got := sourcepods.Valid(mirror.FileSource, batch, d.add)
	assert.Equal(t, []string{"a_default"}, names(got))
	assert.Len(t, d, 5)
	assert.Contains(t, d[2], "same full name")
	assert.Contains(t, d[3], "which an earlier pod of the source has")
	assert.Contains(t, d[4], "only the API server source may send mirror pods")

	d = nil
	got = sourcepods.Valid(mirror.ApiserverSource, batch, d.add)
	assert.Equal(t, []string{"a_default", "m_default"}, names(got), "the API server may send mirror pods")
	assert.Len(t, d, 4)
}

func TestStamp(t *testing.T) {
	p := pod("a", "a")
	p.Annotations = map[string]string{mirror.ConfigSourceAnnotationKey: mirror.FileSource, "team": "x"}
	stamped := sourcepods.Stamp(p, mirror.ApiserverSource)
	assert.Equal(t, mirror.ApiserverSource, stamped.Annotations[mirror.ConfigSourceAnnotationKey])
	assert.Equal(t, "x", stamped.Annotations["team"])
	assert.Equal(t, mirror.FileSource, p.Annotations[mirror.ConfigSourceAnnotationKey], "the caller's pod is not modified")
	assert.Same(t, stamped, sourcepods.Stamp(stamped, mirror.ApiserverSource), "a pod that already says so is not copied")
	assert.Equal(t, mirror.FileSource, sourcepods.Stamp(pod("b", "b"), mirror.FileSource).Annotations[mirror.ConfigSourceAnnotationKey])
}

func TestReporter(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	var got []string
	rec := event.RecorderFunc(func(obj runtime.Object, eventType, reason, msgFmt string, args ...any) {
		got = append(got, eventType+" "+reason+" "+obj.(*v1.Pod).Name+": "+fmt.Sprintf(msgFmt, args...))
	})
	drop := sourcepods.Reporter(log, rec, "source", "api")
	sourcepods.Identified([]*v1.Pod{nil, pod("", "b")}, drop)
	assert.Equal(t, []string{"Warning FailedValidation b: pod b_default has no UID"}, got, "an event for the pod that is not nil")
	require.Len(t, lines, 2, "one error line per dropped pod")
	assert.Contains(t, lines[0], `"error"="pod 0 of the batch is nil"`)
	assert.Contains(t, lines[1], `"source"="api"`)
}
