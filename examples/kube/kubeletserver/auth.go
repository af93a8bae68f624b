package kubeletserver

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
)

// Cache lifetimes of the delegated decisions: the kubelet's defaults.
const (
	tokenCacheTTL = 2 * time.Minute
	allowCacheTTL = 5 * time.Minute
	denyCacheTTL  = 30 * time.Second
	reviewTimeout = 10 * time.Second
)

// reviewBackoff retries a TokenReview or SubjectAccessReview that failed
// to reach the API server.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// authFilter authenticates and authorizes every request as the kubelet's
// webhook mode does.
type authFilter struct {
	nodeName string
	authn    *requestAuthenticator
	authz    *reviewAuthorizer
	log      logr.Logger
}

func newAuthFilter(nodeName string, clientCA []byte, client kubernetes.Interface, log logr.Logger) (*authFilter, error) {
	authn, err := newRequestAuthenticator(clientCA, client.AuthenticationV1().TokenReviews())
	if err != nil {
		return nil, err
	}
	authz := newReviewAuthorizer(client.AuthorizationV1().SubjectAccessReviews())
	return &authFilter{nodeName: nodeName, authn: authn, authz: authz, log: log}, nil
}

// wrap returns next behind authentication (401 when it fails) and
// authorization (403 when no subresource of the path is allowed).
func (f *authFilter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := f.authn.AuthenticateRequest(r)
		if err != nil {
			f.log.V(2).Info("Unauthorized kubelet API request", "path", r.URL.Path, "error", err.Error())
		}
		if err != nil || !ok {
			// A client without a credential gets nothing more from this
			// connection: it is closed once the answer is written, rather
			// than kept alive for a next request.
			w.Header().Set("Connection", "close")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := f.attributes(resp.User, r)
		for _, a := range attrs {
			decision, reason, err := f.authz.Authorize(r.Context(), a)
			if err != nil {
				f.log.Error(err, "Authorizing a kubelet API request", "user", a.GetUser().GetName(), "path", r.URL.Path)
				continue
			}
			if decision == authorizer.DecisionAllow {
				next.ServeHTTP(w, r)
				return
			}
			f.log.V(2).Info("Forbidden kubelet API request", "user", a.GetUser().GetName(),
				"path", r.URL.Path, "subresource", a.GetSubresource(), "reason", reason)
		}
		subresources := make([]string, len(attrs))
		for i, a := range attrs {
			subresources[i] = a.GetSubresource()
		}
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)",
			resp.User.GetName(), attrs[0].GetVerb(), subresources), http.StatusForbidden)
	})
}

// attributes returns what the request asks for, as the kubelet names it:
// the Node of this node, with the subresource of the path (the first
// allowed one wins): "stats" for /stats, "metrics" for /metrics and
// /metrics/resource, "pods" or "proxy" for /pods and /runningpods (the
// kubelet's fine-grained authorization), "healthz" or "proxy" for
// /healthz, and "proxy" for the rest: container logs, exec, attach and
// port-forward.
func (f *authFilter) attributes(u user.Info, r *http.Request) []authorizer.Attributes {
	var verb string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		verb = "get"
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(r.Method)
	}
	var subresources []string
	switch path := r.URL.Path; {
	case isSubpath(path, "/stats"):
		subresources = []string{"stats"}
	case isSubpath(path, "/metrics"):
		subresources = []string{"metrics"}
	case isSubpath(path, "/pods"), isSubpath(path, "/runningpods"):
		subresources = []string{"pods", "proxy"}
	case isSubpath(path, "/healthz"):
		subresources = []string{"healthz", "proxy"}
	default:
		subresources = []string{"proxy"}
	}
	attrs := make([]authorizer.Attributes, len(subresources))
	for i, sub := range subresources {
		attrs[i] = authorizer.AttributesRecord{
			User:            u,
			Verb:            verb,
			APIVersion:      "v1",
			Resource:        "nodes",
			Subresource:     sub,
			Name:            f.nodeName,
			ResourceRequest: true,
			Path:            r.URL.Path,
		}
	}
	return attrs
}

// isSubpath says whether path is root or below it.
func isSubpath(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}
