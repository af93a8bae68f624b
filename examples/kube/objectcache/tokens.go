package objectcache

import (
	"context"
	"errors"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
//
// Both judge from the API server's own cache of pods, which follows the
// binding a moment after the node's watch has shown it: on a busy API
// server a pod's first TokenRequest, sent as soon as the pod reached the
// node, can be refused as if the pod were on another node (Forbidden,
// "scheduled on a different node" or "no relationship found between
// node"). RequestToken asks again after such an answer, after
// TokenCacheLagRetries waits doubling from TokenCacheLagBackoff (2.55 s
// in all), before it returns it; any other error it returns at once.
//
// The lag is short: in examples/kube's BenchmarkPodStartup (300 pods at
// 20 a second on 10 nodes, 2026-12-07) 1.3 % of first requests were
// refused, and every one of them was granted at its first retry, 10 ms
// later. A first wait of 50 ms had made those pods the slowest 1–2 %.
type TokenRequester struct {
	client kubernetes.Interface
}

var _ volume.TokenRequester = (*TokenRequester)(nil)

// The retries of a TokenRequest the API server refused from a cache that
// has not yet seen the pod's binding: TokenCacheLagRetries more requests,
// the first TokenCacheLagBackoff after the refusal, each wait twice the
// one before.
const (
	TokenCacheLagRetries = 8
	TokenCacheLagBackoff = 10 * time.Millisecond
)

// NewTokenRequester returns a TokenRequester over client.
func NewTokenRequester(client kubernetes.Interface) *TokenRequester {
	return &TokenRequester{client: client}
}

// RequestToken creates a token for the service account of namespace:
// ServiceAccounts(namespace).CreateToken, asked again while the API
// server answers from a cache behind the pod's binding (see
// TokenRequester). Called from the volume manager's goroutines; safe for
// concurrent use. Its error is the API server's last answer, or ctx's
// error when ctx ends during a wait.
func (r *TokenRequester) RequestToken(ctx context.Context, namespace, serviceAccountName string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if r == nil || r.client == nil {
		return nil, errors.New("objectcache: TokenRequester has no client")
	}
	wait := TokenCacheLagBackoff
	for retry := 0; ; retry++ {
		resp, err := r.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccountName, req, metav1.CreateOptions{})
		if err == nil || retry == TokenCacheLagRetries || !bindingNotYetSeen(err) {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait *= 2
	}
}

// bindingNotYetSeen says whether err is the API server refusing a node's
// TokenRequest because its cache of pods does not yet show the pod bound
// to the node: NodeRestriction's "node requested token bound to a pod
// scheduled on a different node" or the Node authorizer's "no
// relationship found between node ... and this object".
func bindingNotYetSeen(err error) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "scheduled on a different node") || strings.Contains(msg, "no relationship found between node")
}
