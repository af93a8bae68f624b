package objectcache

import (
	"context"
	"errors"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/lifecycle/volume"
)

// TokenRequester asks the API server for service-account tokens
// (TokenRequest, the serviceaccounts/token subresource) through a
// clientset: volume.TokenRequester. With the node's own client, the Node
// authorizer and the NodeRestriction admission plugin let it ask only for
// the service accounts of pods bound to the node, with tokens bound to
// those pods.
type TokenRequester struct {
	client kubernetes.Interface
}

var _ volume.TokenRequester = (*TokenRequester)(nil)

// NewTokenRequester returns a TokenRequester over client.
func NewTokenRequester(client kubernetes.Interface) *TokenRequester {
	return &TokenRequester{client: client}
}

// RequestToken creates a token for the service account of namespace:
// ServiceAccounts(namespace).CreateToken. Called from the volume
// manager's goroutines; safe for concurrent use.
func (r *TokenRequester) RequestToken(ctx context.Context, namespace, serviceAccountName string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if r == nil || r.client == nil {
		return nil, errors.New("objectcache: TokenRequester has no client")
	}
	return r.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccountName, req, metav1.CreateOptions{})
}
