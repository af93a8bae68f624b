package volume

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
)

// TokenRequester asks the API server for a service-account token bound to
// a pod (TokenRequest, the serviceaccounts/token subresource): a
// client-go clientset's ServiceAccounts(namespace).CreateToken(ctx,
// serviceAccountName, req, metav1.CreateOptions{}) does it
// (examples/kube/objectcache has one). req is the manager's: read it,
// do not keep it. The response is the server's TokenRequest, with the
// token in Status.Token, its expiry in Status.ExpirationTimestamp and the
// lifetime granted in Spec.ExpirationSeconds.
//
// RequestToken is called from SetUp's and Run's goroutines, for any pod,
// concurrently; it should honour ctx. A panic fails the request.
type TokenRequester interface {
	RequestToken(ctx context.Context, namespace, serviceAccountName string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// TokenRequesterFunc adapts a function to a TokenRequester.
type TokenRequesterFunc func(ctx context.Context, namespace, serviceAccountName string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)

// RequestToken calls f.
func (f TokenRequesterFunc) RequestToken(ctx context.Context, namespace, serviceAccountName string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return f(ctx, namespace, serviceAccountName, req)
}

var _ TokenRequester = TokenRequesterFunc(nil)

// Token lifetimes, as the API defines them and the kubelet refreshes them.
const (
	// defaultTokenSeconds is a projection's expirationSeconds when unset.
	defaultTokenSeconds = 3600
	// minTokenSeconds is the shortest expirationSeconds the API allows.
	minTokenSeconds = 600
	// maxTokenAge is how old a token may get before it is refreshed,
	// whatever its lifetime.
	maxTokenAge = 24 * time.Hour
	// tokenRetry is how soon a failed refresh of a token that is still
	// valid is tried again.
	tokenRetry = 10 * time.Second
	// maxTokenBytes bounds a token the server returns.
	maxTokenBytes = 64 << 10
)

// tokenKey names one token of a pod: a projection, by the volume and path
// it is written to, and what it asks for.
type tokenKey struct {
	volume, path, audience, serviceAccount string
	seconds                                int64
}

// cachedToken is a token the manager holds for a pod.
type cachedToken struct {
	token   string
	expires time.Time
	// refreshAt is when to ask for a new one: at 80% of its lifetime, or
	// once it is 24 hours old, or (after a failed refresh) tokenRetry later.
	refreshAt time.Time
}

// token returns the token of a serviceAccountToken projection for pod,
// from rec's cache while it need not be refreshed, else from the
// TokenRequester, as the kubelet's token manager does: a failed refresh
// keeps the old token while it is valid. rec.mu must be held.
func (m *Manager) tokenLocked(ctx context.Context, rec *podRecord, pod *v1.Pod, volume string, src *v1.ServiceAccountTokenProjection) (string, error) {
	seconds := int64(defaultTokenSeconds)
	if src.ExpirationSeconds != nil {
		seconds = *src.ExpirationSeconds
	}
	switch {
	case seconds < minTokenSeconds:
		return "", fmt.Errorf("serviceAccountToken expirationSeconds %d is below the minimum of %d", seconds, minTokenSeconds)
	case seconds > 1<<32:
		return "", fmt.Errorf("serviceAccountToken expirationSeconds %d is too large", seconds)
	case pod.Spec.ServiceAccountName == "":
		return "", errors.New("the pod names no service account for its serviceAccountToken projection")
	case m.tokens == nil:
		return "", errors.New("this node has no TokenRequester for serviceAccountToken projections")
	}
	key := tokenKey{volume: volume, path: src.Path, audience: src.Audience, serviceAccount: pod.Spec.ServiceAccountName, seconds: seconds}
	now := m.clock.Now()
	cached := rec.tokens[key]
	if cached != nil && now.Before(cached.refreshAt) {
		return cached.token, nil
	}
	fresh, err := m.requestToken(ctx, pod, src.Audience, seconds, now)
	if err != nil {
		if cached == nil {
			return "", fmt.Errorf("failed to fetch token: %w", err)
		}
		// Try again soon, not at once: Run wakes at the refresh time.
		cached.refreshAt = now.Add(tokenRetry)
		if !now.Before(cached.expires) {
			return "", fmt.Errorf("token of service account %s/%s expired and refresh failed: %w", pod.Namespace, pod.Spec.ServiceAccountName, err)
		}
		m.logger.Error(err, "Couldn't refresh a service-account token; the current one is still valid", "pod", podName(pod), "volume", volume)
		return cached.token, nil
	}
	rec.tokens[key] = fresh
	return fresh.token, nil
}

// requestToken asks for a token bound to pod.
func (m *Manager) requestToken(ctx context.Context, pod *v1.Pod, audience string, seconds int64, now time.Time) (_ *cachedToken, err error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	var resp *authenticationv1.TokenRequest
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("RequestToken panicked: %v", r)
			}
		}()
		resp, err = m.tokens.RequestToken(ctx, pod.Namespace, pod.Spec.ServiceAccountName, req)
	}()
	switch {
	case err != nil:
		return nil, err
	case resp == nil || resp.Status.Token == "":
		return nil, errors.New("the TokenRequest response holds no token")
	case len(resp.Status.Token) > maxTokenBytes:
		return nil, fmt.Errorf("the TokenRequest response holds a token of %d bytes, more than %d", len(resp.Status.Token), maxTokenBytes)
	case resp.Status.ExpirationTimestamp.IsZero():
		return nil, errors.New("the TokenRequest response has no expiration time")
	}
	expires := resp.Status.ExpirationTimestamp.Time
	granted := time.Duration(seconds) * time.Second
	if resp.Spec.ExpirationSeconds != nil && *resp.Spec.ExpirationSeconds > 0 {
		granted = time.Duration(*resp.Spec.ExpirationSeconds) * time.Second
	}
	issued := expires.Add(-granted)
	refreshAt := expires.Add(-granted / 5)
	if aged := issued.Add(maxTokenAge); aged.Before(refreshAt) {
		refreshAt = aged
	}
	if !refreshAt.After(now) {
		// A token already due (a clock skew, a short grant): try again
		// soon rather than at once, over and over.
		refreshAt = now.Add(tokenRetry)
	}
	return &cachedToken{token: resp.Status.Token, expires: expires, refreshAt: refreshAt}, nil
}
