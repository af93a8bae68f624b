package processruntime_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The defaults match an image by repository name, whatever its registry,
// tag or digest; images that only share a prefix or suffix do not match.
func TestDefaultImageConfigsMatchByRepository(t *testing.T) {
	t.Parallel()
	defaults, err := processruntime.NewImageTable(processruntime.DefaultImageConfigs())
	require.NoError(t, err)
	for _, image := range []string{
		"busybox",
		"busybox:1.36",
		"docker.io/library/busybox:1.36",
		"docker.io/busybox",
		"busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"registry.k8s.io/busybox",
		"registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
		"gcr.io/google-containers/busybox:latest",
		"localhost:5000/busybox:dev",
	} {
		cfg, ok := defaults.ImageConfig(image)
		if assert.True(t, ok, image) {
			assert.Equal(t, []string{"sh"}, cfg.Cmd, image)
			assert.Empty(t, cfg.Entrypoint, image)
		}
	}
	for _, image := range []string{"busyboxes", "example.com/my-busybox:1", "nginx-unprivileged", "example.com/agnhost:2.4", ""} {
		_, ok := defaults.ImageConfig(image)
		assert.False(t, ok, image)
	}
	for image, cmd := range map[string][]string{
		"alpine:3.20":          {"/bin/sh"},
		"debian:bookworm-slim": {"bash"},
		"ubuntu":               {"/bin/bash"},
		"python:3.12":          {"python3"},
		"perl:5.40":            {"perl"},
		"nginx:1.27":           {"nginx", "-g", "daemon off;"},
		"opensuse/leap:15.6":   {"/bin/bash"},
	} {
		cfg, ok := defaults.ImageConfig(image)
		require.True(t, ok, image)
		assert.Equal(t, cmd, cfg.Cmd, image)
	}
	assert.Equal(t, len(processruntime.DefaultImageConfigs()), defaults.Len())
}

// Of the keys that match, the whole repository path beats its last
// element, and a tag beats none.
func TestImageTableMostSpecificWins(t *testing.T) {
	t.Parallel()
	table, err := processruntime.NewImageTable(map[string]processruntime.ImageConfig{
		"app":                    {Cmd: []string{"any-app"}},
		"app:2":                  {Cmd: []string{"any-app-2"}},
		"team/app":               {Cmd: []string{"team-app"}},
		"example.com/team/app:3": {Cmd: []string{"team-app-3"}},
	})
	require.NoError(t, err)
	for image, want := range map[string]string{
		"other.io/team/app:3": "team-app-3", // the registry is not part of the key
		"team/app:1":          "team-app",
		"team/app:2":          "team-app", // the whole path before the tag of a last element
		"other/app:2":         "any-app-2",
		"other/app":           "any-app",
		"app:9@sha256:ab":     "any-app",
	} {
		cfg, ok := table.ImageConfig(image)
		require.True(t, ok, image)
		assert.Equal(t, []string{want}, cfg.Cmd, image)
	}
	cfg, _ := table.ImageConfig("app")
	cfg.Cmd[0] = "changed"
	again, _ := table.ImageConfig("app")
	assert.Equal(t, []string{"any-app"}, again.Cmd, "a result is the caller's")
	var empty *processruntime.ImageTable
	_, ok := empty.ImageConfig("busybox")
	assert.False(t, ok, "a nil table knows nothing")
}

func TestNewImageTableErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		entries map[string]processruntime.ImageConfig
		want    string
	}{
		"empty reference": {map[string]processruntime.ImageConfig{"": {}}, `image reference "" has no repository name`},
		"empty tag":       {map[string]processruntime.ImageConfig{"busybox:": {}}, `image reference "busybox:" has an empty tag`},
		"registry only":   {map[string]processruntime.ImageConfig{"example.com/": {}}, "has no repository name"},
		"same image":      {map[string]processruntime.ImageConfig{"busybox": {}, "docker.io/library/busybox": {}}, "names the same image as another entry"},
		"env":             {map[string]processruntime.ImageConfig{"app": {Env: []string{"=x"}}}, `env entry "=x" is not KEY=value`},
		"user name":       {map[string]processruntime.ImageConfig{"app": {User: "nginx"}}, `user "nginx" is not numeric`},
		"group name":      {map[string]processruntime.ImageConfig{"app": {User: "101:nginx"}}, `group "nginx" is not numeric`},
		"multicall path":  {map[string]processruntime.ImageConfig{"app": {Multicall: "/bin/busybox"}}, `multicall "/bin/busybox" must be a program's name, without a path`},
	} {
		_, err := processruntime.NewImageTable(tc.entries)
		require.Error(t, err, name)
		assert.True(t, strings.HasPrefix(err.Error(), "processruntime: image table: "), err.Error())
		assert.Contains(t, err.Error(), tc.want, name)
	}
	many := map[string]processruntime.ImageConfig{}
	for i := range processruntime.MaxImageTableEntries + 1 {
		many[fmt.Sprintf("app%d", i)] = processruntime.ImageConfig{}
	}
	_, err := processruntime.NewImageTable(many)
	assert.ErrorContains(t, err, "at most 10000")
}

func TestLoadImageTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	table, err := processruntime.LoadImageTable(write("ok.yaml", `
images:
  example.com/team/app:1.2:
    entrypoint: [/usr/local/bin/app]
    cmd: [--port=8080]
    workingDir: /srv/app
    env: [MODE=production]
    user: "1000:1000"
  busybox:
    cmd: [ash]
`))
	require.NoError(t, err)
	cfg, ok := table.ImageConfig("example.com/team/app:1.2")
	require.True(t, ok)
	assert.Equal(t, processruntime.ImageConfig{Entrypoint: []string{"/usr/local/bin/app"}, Cmd: []string{"--port=8080"}, WorkingDir: "/srv/app", Env: []string{"MODE=production"}, User: "1000:1000"}, cfg)
	_, ok = table.ImageConfig("example.com/team/app:1.3")
	assert.False(t, ok, "another tag")
	cfg, _ = table.ImageConfig("busybox")
	assert.Equal(t, []string{"ash"}, cfg.Cmd, "the file's own busybox entry")

	_, err = processruntime.LoadImageTable(write("typo.yaml", "images:\n  app:\n    entrypont: [x]\n"))
	assert.ErrorContains(t, err, `unknown field "entrypont"`)
	_, err = processruntime.LoadImageTable(write("user.json", `{"images": {"app": {"user": "root"}}}`))
	assert.ErrorContains(t, err, `"app": user "root" is not numeric`)
	assert.ErrorContains(t, err, "user.json")
	_, err = processruntime.LoadImageTable(write("big.yaml", "# "+strings.Repeat("x", processruntime.MaxImageTableBytes)))
	assert.ErrorContains(t, err, "larger than 1048576 bytes")
	_, err = processruntime.LoadImageTable(filepath.Join(dir, "missing.yaml"))
	assert.ErrorContains(t, err, "processruntime: image table: open ")
}
