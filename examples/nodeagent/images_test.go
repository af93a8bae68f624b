package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Containers without a command run their image's: busybox's from the
// runtime's defaults (args are its command), the others from the file of
// --image-config; a file the runtime cannot read stops the agent at
// startup with the file's error.
func TestImageConfigFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeManifest(t, dir, "busybox", `apiVersion: v1
kind: Pod
metadata: {name: busybox}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: docker.io/library/busybox:1.36, args: [sh, -c, "exit 0"]}
`)
	writeManifest(t, dir, "tool", `apiVersion: v1
kind: Pod
metadata: {name: tool}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: example.com/team/tool:2, args: ["exit 0"]}
`)
	images := filepath.Join(t.TempDir(), "images.yaml")
	require.NoError(t, os.WriteFile(images, []byte("images:\n  team/tool:\n    entrypoint: [sh, -c]\n"), 0o600))
	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"--manifests", dir, "--until-idle", "--state-dir", t.TempDir(), "--node-name", "images-node", "--image-config", images}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	out := stdout.String()
	assert.Regexp(t, `default/busybox-images-node +Succeeded +0 +main=0`, out)
	assert.Regexp(t, `default/tool-images-node +Succeeded +0 +main=0`, out)

	require.NoError(t, os.WriteFile(images, []byte("images:\n  team/tool:\n    user: nobody\n"), 0o600))
	stdout, stderr = syncBuffer{}, syncBuffer{}
	code = run(context.Background(), []string{"--manifests", dir, "--state-dir", t.TempDir(), "--image-config", images}, &stdout, &stderr)
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, stderr.String(), `--image-config: processruntime: image table: "team/tool": user "nobody" is not numeric`)
	assert.Empty(t, stdout.String(), "nothing ran")
}
