package objectcache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The store keeps a secret or config map without its managed fields and
// kubectl's copy of it, and with everything the pods' environments and
// volumes read; the watch's object is not changed.
func TestStoreKeepsASlimObject(t *testing.T) {
	immutable := true
	meta := metav1.ObjectMeta{
		Name: "db", Namespace: "team", ResourceVersion: "7",
		Labels:        map[string]string{"app": "db"},
		Annotations:   map[string]string{lastApplied: `{"data":{"password":"aHVudGVyMg=="}}`, "team": "storage"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}
	secret := &v1.Secret{ObjectMeta: meta, Type: v1.SecretTypeOpaque, Immutable: &immutable, Data: map[string][]byte{"password": []byte("hunter2")}}
	s := newObjectStore("db", nil)
	require.NoError(t, s.Replace([]any{secret}, "7"))
	got, ok := s.get().(*v1.Secret)
	require.True(t, ok)
	assert.Equal(t, map[string][]byte{"password": []byte("hunter2")}, got.Data)
	assert.Equal(t, v1.SecretTypeOpaque, got.Type)
	assert.Equal(t, map[string]string{"team": "storage"}, got.Annotations)
	assert.Equal(t, map[string]string{"app": "db"}, got.Labels)
	assert.Equal(t, "7", got.ResourceVersion)
	assert.Nil(t, got.ManagedFields)
	assert.True(t, s.isImmutable(), "immutability is still seen")
	assert.Len(t, secret.ManagedFields, 1, "the watch's object is not changed")
	assert.Contains(t, secret.Annotations, lastApplied)

	cm := &v1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {2}}}
	s = newObjectStore("db", nil)
	require.NoError(t, s.Add(cm))
	gotCM, ok := s.get().(*v1.ConfigMap)
	require.True(t, ok)
	assert.Equal(t, cm.Data, gotCM.Data)
	assert.Equal(t, cm.BinaryData, gotCM.BinaryData)
	assert.Nil(t, gotCM.ManagedFields)
	assert.NotContains(t, gotCM.Annotations, lastApplied)
}
