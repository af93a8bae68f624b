package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle/podenv"
)

func writeObjects(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	// A distinct modification time, however fast the test runs.
	later := time.Now().Add(time.Duration(len(content)) * time.Second)
	require.NoError(t, os.Chtimes(path, later, later))
}

func TestFileObjects(t *testing.T) {
	dir := t.TempDir()
	writeObjects(t, dir, "db.yaml", `
apiVersion: v1
kind: Secret
metadata: {name: db}
data: {password: czNjcmV0}   # base64 of s3cret
stringData: {user: admin}
---
# a comment-only document
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: shop}
data: {mode: fast}
binaryData: {logo: AAEC}
`)
	writeObjects(t, dir, "README.md", "not an object file")
	f := newFileObjects(dir)
	ctx := context.Background()

	s, err := f.GetSecret(ctx, "default", "db")
	require.NoError(t, err)
	require.Equal(t, map[string][]byte{"password": []byte("s3cret"), "user": []byte("admin")}, s.Data)
	require.Equal(t, v1.SecretTypeOpaque, s.Type)
	cm, err := f.GetConfigMap(ctx, "shop", "app")
	require.NoError(t, err)
	require.Equal(t, "fast", cm.Data["mode"])
	require.Equal(t, []byte{0, 1, 2}, cm.BinaryData["logo"])
	_, err = f.GetConfigMap(ctx, "default", "app")
	require.True(t, apierrors.IsNotFound(err), "by namespace: %v", err)
	require.Equal(t, `configmap "app" not found`, err.Error())
	_, err = f.GetSecret(ctx, "shop", "app")
	require.True(t, apierrors.IsNotFound(err), "by kind: %v", err)

	// A change of the directory is read at the next Get.
	writeObjects(t, dir, "db.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: changed}\n")
	s, err = f.GetSecret(ctx, "default", "db")
	require.NoError(t, err)
	require.Equal(t, "changed", string(s.Data["password"]))
	_, err = f.GetConfigMap(ctx, "shop", "app")
	require.True(t, apierrors.IsNotFound(err), "gone with its file's document")

	// The objects serve a Builder as the API server's would.
	b, err := podenv.New(f, podenv.Options{})
	require.NoError(t, err)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "c", EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}}}},
	}}}}
	env, err := b.Build(ctx, pod, &pod.Spec.Containers[0], podenv.Inputs{})
	require.NoError(t, err)
	require.Equal(t, []podenv.EnvVar{{Name: "password", Value: "changed"}}, env)
}

func TestFileObjectsBadFiles(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, files, want string
		notFound          bool
	}{
		{name: "not YAML", files: "a.yaml=: : :", want: "some files of"},
		{name: "a pod", files: "a.yaml=apiVersion: v1\nkind: Pod\nmetadata: {name: x}", want: `a.yaml: document 1: apiVersion "v1" and kind "Pod"; want v1 Secret or ConfigMap`},
		{name: "unknown field", files: "a.yaml=apiVersion: v1\nkind: Secret\nmetadata: {name: x}\ndta: {}", want: `not a valid secret`},
		{name: "no name", files: "a.yaml=apiVersion: v1\nkind: Secret\nmetadata: {}", want: "a secret without a name"},
		{name: "bad base64", files: "a.yaml=apiVersion: v1\nkind: Secret\nmetadata: {name: x}\ndata: {k: '!!'}", want: "not a valid secret"},
		{name: "defined twice", files: "a.yaml=apiVersion: v1\nkind: Secret\nmetadata: {name: db}|b.yml=apiVersion: v1\nkind: Secret\nmetadata: {name: db}", want: "nodeagent: secret default/db is defined twice, in a.yaml and b.yml"},
		{name: "too large", files: "a.yaml=" + strings.Repeat("#", maxObjectFileBytes+1), want: "a.yaml: larger than 4194304 bytes"},
		{name: "no directory", files: "", notFound: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "objects")
			if tc.files != "" {
				require.NoError(t, os.Mkdir(dir, 0o700))
				for _, file := range strings.Split(tc.files, "|") {
					name, content, _ := strings.Cut(file, "=")
					writeObjects(t, dir, name, content)
				}
			}
			_, err := newFileObjects(dir).GetSecret(ctx, "default", "db")
			if tc.notFound {
				require.True(t, apierrors.IsNotFound(err), "%v", err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.False(t, apierrors.IsNotFound(err), "a broken file is never a silent NotFound")
		})
	}
}
