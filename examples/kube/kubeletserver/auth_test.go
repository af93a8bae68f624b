package kubeletserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

// TestAuthentication: only a certificate of the client CA or a token the
// API server accepts gets in; a certificate of another CA claiming to be
// the administrator, headers naming a user, and unknown tokens get 401,
// on every endpoint.
func TestAuthentication(t *testing.T) {
	n, _ := streamingNode(t, kubeletserver.Options{ContainerLogs: newFakeLogs().read})
	roguekey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	rogue, _, _ := signWith(t, nil, roguekey, pkix.Name{CommonName: userAdmin, Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth)
	paths := []string{"/healthz", "/metrics", "/metrics/resource", "/stats/summary", "/containerLogs/ns/p0/c",
		"/exec/ns/p0/c?command=echo&output=1", "/attach/ns/p0/c?output=1", "/portForward/ns/p0"}
	for _, path := range paths {
		for name, req := range map[string]func() (*http.Client, *http.Request){
			"anonymous": func() (*http.Client, *http.Request) {
				r, _ := http.NewRequest(http.MethodGet, n.url+path, nil)
				return n.client(), r
			},
			"rogue CA": func() (*http.Client, *http.Request) {
				r, _ := http.NewRequest(http.MethodGet, n.url+path, nil)
				return n.client(rogue), r
			},
			"forged headers": func() (*http.Client, *http.Request) {
				r, _ := http.NewRequest(http.MethodGet, n.url+path, nil)
				r.Header.Set("X-Remote-User", userAdmin)
				r.Header.Set("X-Remote-Group", "system:masters")
				r.Header.Set("Impersonate-User", userAdmin)
				return n.client(), r
			},
			"unknown token": func() (*http.Client, *http.Request) {
				r, _ := http.NewRequest(http.MethodGet, n.url+path, nil)
				r.Header.Set("Authorization", "Bearer not-a-token")
				return n.client(), r
			},
		} {
			c, r := req()
			resp, err := c.Do(r)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s", name, path)
		}
	}
}

// TestAuthorization: each endpoint asks for the kubelet's subresource;
// an identity granted other ones is refused with 403 naming what it
// lacks, and a failed SubjectAccessReview refuses (fails closed).
func TestAuthorization(t *testing.T) {
	n, _ := streamingNode(t, kubeletserver.Options{ContainerLogs: newFakeLogs().read})
	for path, sub := range map[string]string{
		"/containerLogs/ns/p0/c": "[proxy]", "/healthz": "[healthz proxy]", "/metrics": "[metrics]",
		"/stats/summary": "[stats]", "/exec/ns/p0/c?command=echo&output=1": "[proxy]",
	} {
		code, body := get(t, n.client(), n.url+path, tokenNobody)
		assert.Equal(t, http.StatusForbidden, code, "%s: %s", path, body)
		assert.Contains(t, body, "subresource(s)="+sub, path)
		code, body = get(t, n.client(), n.url+path, tokenFail)
		assert.Equal(t, http.StatusForbidden, code, "a failing authorizer refuses %s: %s", path, body)
	}
	for path, want := range map[string]int{"/metrics": http.StatusOK, "/stats/summary": http.StatusOK, "/containerLogs/ns/p0/c": http.StatusForbidden, "/healthz": http.StatusForbidden} {
		code, body := get(t, n.client(), n.url+path, tokenScraper)
		assert.Equal(t, want, code, "scraper on %s: %s", path, body)
	}
	code, body := get(t, n.admin(), n.url+"/containerLogs/ns/p0/c", "")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "plain\n", body)
}
