package kubeletserver

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// The kubelet's webhook authentication and authorization, written against
// the API server's review APIs directly: client certificates of the
// client CA, bearer tokens by TokenReview, every request by
// SubjectAccessReview, the answers cached. (k8s.io/apiserver's delegating
// factories do the same, but linking them brings CEL, OpenTelemetry and
// the apiserver's configuration API into the agent: about 15 MiB more of
// resident memory at start.)

// maxCachedReviews bounds each review cache: tokens and request
// attributes come from the clients. When full, expired entries are
// dropped, then the cache is emptied.
const maxCachedReviews = 4096

// requestAuthenticator authenticates a request by its client certificate
// (verified against the client CA) or else its bearer token (by
// TokenReview); a request with neither is not authenticated.
type requestAuthenticator struct {
	roots  *x509.CertPool
	tokens authenticationclient.TokenReviewInterface
	cache  reviewCache[*authenticator.Response]
}

func newRequestAuthenticator(clientCA []byte, tokens authenticationclient.TokenReviewInterface) (*requestAuthenticator, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(clientCA) {
		return nil, errors.New("kubeletserver: the client CA: no PEM certificate in it")
	}
	return &requestAuthenticator{roots: roots, tokens: tokens, cache: newReviewCache[*authenticator.Response]()}, nil
}

var _ authenticator.Request = (*requestAuthenticator)(nil)

// AuthenticateRequest returns the request's user. ok is false (with a nil
// error) when the request carries no credential or one nobody vouches
// for; the error says why a credential was refused or could not be
// checked.
func (a *requestAuthenticator) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return a.certificate(r.TLS.PeerCertificates)
	}
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, found := strings.Cut(auth, " ")
	if !found || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return nil, false, nil
	}
	return a.token(r.Context(), strings.TrimSpace(token))
}

// certificate is the x509 authenticator: the leaf's common name is the
// user, its organizations the groups.
func (a *requestAuthenticator) certificate(chain []*x509.Certificate) (*authenticator.Response, bool, error) {
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: a.roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, false, fmt.Errorf("kubeletserver: the client certificate: %w", err)
	}
	if leaf.Subject.CommonName == "" {
		return nil, false, errors.New("kubeletserver: the client certificate names no user (empty common name)")
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: leaf.Subject.CommonName, Groups: leaf.Subject.Organization}}, true, nil
}

// token asks the API server who token is, once per tokenCacheTTL.
func (a *requestAuthenticator) token(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	var status authenticationv1.TokenReviewStatus
	resp, err := a.cache.do(ctx, key, func() (*authenticator.Response, time.Duration, error) {
		err := retryReview(ctx, func(ctx context.Context) error {
			tr, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
			if err == nil {
				status = tr.Status
			}
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("kubeletserver: the TokenReview: %w", err)
		}
		if !status.Authenticated {
			return nil, tokenCacheTTL, nil
		}
		u := &user.DefaultInfo{Name: status.User.Username, UID: status.User.UID, Groups: status.User.Groups}
		if len(status.User.Extra) > 0 {
			u.Extra = make(map[string][]string, len(status.User.Extra))
			for k, v := range status.User.Extra {
				u.Extra[k] = v
			}
		}
		return &authenticator.Response{User: u, Audiences: status.Audiences}, tokenCacheTTL, nil
	})
	if err != nil {
		return nil, false, err
	}
	if resp == nil && status.Error != "" {
		return nil, false, fmt.Errorf("kubeletserver: the token was refused: %s", status.Error)
	}
	return resp, resp != nil, nil
}

// reviewAuthorizer authorizes by SubjectAccessReview, allowed answers
// cached allowCacheTTL, others denyCacheTTL.
type reviewAuthorizer struct {
	reviews authorizationclient.SubjectAccessReviewInterface
	cache   reviewCache[authorizationv1.SubjectAccessReviewStatus]
}

func newReviewAuthorizer(reviews authorizationclient.SubjectAccessReviewInterface) *reviewAuthorizer {
	return &reviewAuthorizer{reviews: reviews, cache: newReviewCache[authorizationv1.SubjectAccessReviewStatus]()}
}

// Authorize asks the API server whether a's user may do what a says. The
// error says the review failed (the request is then refused).
func (z *reviewAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	spec := subjectAccessReviewSpec(a)
	raw, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("kubeletserver: the SubjectAccessReview: %w", err)
	}
	key := string(raw)
	status, err := z.cache.do(ctx, key, func() (authorizationv1.SubjectAccessReviewStatus, time.Duration, error) {
		var status authorizationv1.SubjectAccessReviewStatus
		err := retryReview(ctx, func(ctx context.Context) error {
			sar, err := z.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			if err == nil {
				status = sar.Status
			}
			return err
		})
		if err != nil {
			return status, 0, fmt.Errorf("kubeletserver: the SubjectAccessReview: %w", err)
		}
		if status.Allowed {
			return status, allowCacheTTL, nil
		}
		return status, denyCacheTTL, nil
	})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	switch {
	case status.Allowed:
		return authorizer.DecisionAllow, status.Reason, nil
	case status.Denied:
		return authorizer.DecisionDeny, status.Reason, nil
	default:
		return authorizer.DecisionNoOpinion, status.Reason, nil
	}
}

// subjectAccessReviewSpec is the review of a: its user and its resource
// (the node's subresources are all the kubelet API asks about).
func subjectAccessReviewSpec(a authorizer.Attributes) authorizationv1.SubjectAccessReviewSpec {
	u := a.GetUser()
	spec := authorizationv1.SubjectAccessReviewSpec{User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
		for k, v := range extra {
			spec.Extra[k] = v
		}
	}
	if a.IsResourceRequest() {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(),
			Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName(),
		}
	} else {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
	}
	return spec
}

// retryReview runs create, again after reviewBackoff's delays while it
// fails, within reviewTimeout.
func retryReview(ctx context.Context, create func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, reviewBackoff, func(ctx context.Context) (bool, error) {
		last = create(ctx)
		return last == nil, nil
	})
	if last != nil {
		return last
	}
	return err
}

// reviewCache is a bounded cache of review answers, each until its
// expiry; concurrent requests for a key not cached share one review. Safe
// for concurrent use.
type reviewCache[T any] struct {
	now      func() time.Time
	mu       sync.Mutex
	entries  map[string]cachedReview[T]
	inFlight map[string]*pendingReview[T]
}

// pendingReview is a review under way; done is closed when value and err
// are set.
type pendingReview[T any] struct {
	done  chan struct{}
	value T
	err   error
}

// do returns the cached answer for key, or that of the review under way
// for it, or runs review (once for all who ask meanwhile) and caches its
// answer for the duration it returns; a failed review is not cached. It
// returns early with ctx's error when ctx ends while it waits for
// another's review.
func (c *reviewCache[T]) do(ctx context.Context, key string, review func() (T, time.Duration, error)) (T, error) {
	if v, ok := c.get(key); ok {
		return v, nil
	}
	c.mu.Lock()
	if p, ok := c.inFlight[key]; ok {
		c.mu.Unlock()
		select {
		case <-p.done:
			return p.value, p.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	p := &pendingReview[T]{done: make(chan struct{})}
	c.inFlight[key] = p
	c.mu.Unlock()
	var ttl time.Duration
	p.value, ttl, p.err = review()
	if p.err == nil {
		c.put(key, p.value, ttl)
	}
	c.mu.Lock()
	delete(c.inFlight, key)
	c.mu.Unlock()
	close(p.done)
	return p.value, p.err
}

type cachedReview[T any] struct {
	value   T
	expires time.Time
}

func newReviewCache[T any]() reviewCache[T] {
	return reviewCache[T]{now: time.Now, entries: map[string]cachedReview[T]{}, inFlight: map[string]*pendingReview[T]{}}
}

func (c *reviewCache[T]) get(key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		var zero T
		return zero, false
	}
	return e.value, true
}

func (c *reviewCache[T]) put(key string, value T, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= maxCachedReviews {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCachedReviews {
			clear(c.entries)
		}
	}
	c.entries[key] = cachedReview[T]{value: value, expires: now.Add(ttl)}
}
