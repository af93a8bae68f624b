package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
)

func TestRedactArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cmd, args []string
		want      []string
	}{
		{"a flag's value after =", nil, []string{"--db-password=hunter2", "--port=5432"}, []string{"--db-password=[redacted]", "--port=5432"}},
		{"a variable", []string{"env", "PASSWORD=x", "API_KEY=y", "USER=z"}, nil, []string{"env", "PASSWORD=[redacted]", "API_KEY=[redacted]", "USER=z"}},
		{"the argument after a bare flag", []string{"app", "--token"}, []string{"hunter2", "--verbose"}, []string{"app", "--token", "[redacted]", "--verbose"}},
		{"in a shell script", []string{"sh", "-c", "PGPASSWORD=hunter2 psql --password hunter2 -h db\n\tmysql --Client-Secret=s3"}, nil,
			[]string{"sh", "-c", "PGPASSWORD=[redacted] psql --password [redacted] -h db\n\tmysql --Client-Secret=[redacted]"}},
		{"a script ending in a bare flag", []string{"sh", "-c", "login -private-key"}, []string{"k"}, []string{"sh", "-c", "login -private-key", "[redacted]"}},
		{"an empty value", []string{"app", "--password=", "--secret", ""}, []string{"after"}, []string{"app", "--password=", "--secret", "", "after"}},
		{"names that are not secret", []string{"app", "--user=bob", "tokens", "password"}, []string{"x=--token"}, []string{"app", "--user=bob", "tokens", "password", "x=--token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, args := append([]string(nil), tc.cmd...), append([]string(nil), tc.args...)
			redactArgs(cmd, args)
			assert.Equal(t, tc.want, append(cmd, args...))
		})
	}
}

// Commands, args and exec actions are redacted in every kind of
// container, and the original pod keeps them.
func TestRedactPodRedactsCommandLines(t *testing.T) {
	t.Parallel()
	exec := func(cmd ...string) *v1.ExecAction { return &v1.ExecAction{Command: cmd} }
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Command: []string{"init", "--secret=a"}}},
		Containers: []v1.Container{{
			Command:        []string{"app"},
			Args:           []string{"--password", "b"},
			LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: exec("check", "TOKEN=c")}},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: exec("check", "--credential", "d")}},
			StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: exec("sh", "-c", "check passwd=e")}},
			Lifecycle: &v1.Lifecycle{
				PostStart: &v1.LifecycleHandler{Exec: exec("hook", "--api-key=f")},
				PreStop:   &v1.LifecycleHandler{Exec: exec("hook", "--token", "g")},
			},
		}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Args:          []string{"--secret-file=h"},
			LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: exec("TOKEN=i")}},
		}}},
	}}
	r := redactPod(pod)
	c := r.Spec.Containers[0]
	assert.Equal(t, []string{"init", "--secret=[redacted]"}, r.Spec.InitContainers[0].Command)
	assert.Equal(t, []string{"--password", "[redacted]"}, c.Args)
	assert.Equal(t, []string{"check", "TOKEN=[redacted]"}, c.LivenessProbe.Exec.Command)
	assert.Equal(t, []string{"check", "--credential", "[redacted]"}, c.ReadinessProbe.Exec.Command)
	assert.Equal(t, []string{"sh", "-c", "check passwd=[redacted]"}, c.StartupProbe.Exec.Command)
	assert.Equal(t, []string{"hook", "--api-key=[redacted]"}, c.Lifecycle.PostStart.Exec.Command)
	assert.Equal(t, []string{"hook", "--token", "[redacted]"}, c.Lifecycle.PreStop.Exec.Command)
	e := r.Spec.EphemeralContainers[0]
	assert.Equal(t, []string{"--secret-file=[redacted]"}, e.Args)
	assert.Equal(t, []string{"TOKEN=[redacted]"}, e.LivenessProbe.Exec.Command)

	assert.Equal(t, []string{"--password", "b"}, pod.Spec.Containers[0].Args, "the original is untouched")
	assert.Equal(t, []string{"check", "TOKEN=c"}, pod.Spec.Containers[0].LivenessProbe.Exec.Command)
}
