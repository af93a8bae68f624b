package action

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
)

func TestExpandStatic(t *testing.T) {
	env := []v1.EnvVar{
		{Name: "PORT", Value: "8080"},
		{Name: "FILE", Value: "/tmp/ready"},
		{Name: "FILE", Value: "/tmp/healthy"}, // a later entry wins
		{Name: "SECRET", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}},
		{Name: "EMPTY", Value: ""},
	}
	for _, tc := range []struct{ in, want string }{
		{"cat $(FILE)", "cat /tmp/healthy"},
		{"localhost:$(PORT)/x", "localhost:8080/x"},
		{"$(PORT)$(PORT)", "80808080"},
		{"$(MISSING)", "$(MISSING)"},
		{"$(SECRET)", "$(SECRET)"}, // valueFrom is not resolved
		{"[$(EMPTY)]", "[]"},
		{"$$(PORT)", "$(PORT)"},
		{"$$$(PORT)", "$8080"},
		{"cost $5", "cost $5"},
		{"end$", "end$"},
		{"open $(PORT", "open $(PORT"},
		{"$()", "$()"},
		{"plain", "plain"},
		{"$é", "$é"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			assert.Equal(t, []string{tc.want}, ExpandStatic([]string{tc.in}, env))
		})
	}
	in := []string{"$(PORT)"}
	_ = ExpandStatic(in, env)
	assert.Equal(t, []string{"$(PORT)"}, in, "the input is not modified")
	assert.Nil(t, ExpandStatic(nil, env))
}
