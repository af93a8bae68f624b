package objectcache_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podkit/podkit/examples/kube/objectcache"
)

// tokenAnswers is a fake clientset whose TokenRequests get errs in turn,
// then a token; at holds when each request came.
func tokenAnswers(errs ...error) (*fake.Clientset, *[]time.Time) {
	client := fake.NewClientset()
	var at []time.Time
	client.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "token" {
			return false, nil, nil
		}
		at = append(at, time.Now())
		if len(at) <= len(errs) {
			return true, nil, errs[len(at)-1]
		}
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "t"}}, nil
	})
	return client, &at
}

var saResource = schema.GroupResource{Resource: "serviceaccounts"}

// notYetBound is NodeRestriction's answer to a node whose API server has
// not yet seen the pod bound to it; noRelationship the Node authorizer's.
var (
	notYetBound    = apierrors.NewForbidden(saResource, "default", errors.New("node requested token bound to a pod scheduled on a different node"))
	noRelationship = apierrors.NewForbidden(saResource, "default", errors.New(`User "system:node:n" cannot create resource "serviceaccounts/token": no relationship found between node 'n' and this object`))
)

// gaps returns the time between each request and the one before.
func gaps(at []time.Time) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(at); i++ {
		d = append(d, at[i].Sub(at[i-1]))
	}
	return d
}

func request(ctx context.Context, client *fake.Clientset) (*authenticationv1.TokenRequest, error) {
	return objectcache.NewTokenRequester(client).RequestToken(ctx, "ns", "default", &authenticationv1.TokenRequest{})
}

// In the synctest bubbles below, time moves only while every goroutine
// waits, so the gaps between requests are the retries' waits exactly.

func TestTokenRequestRetriesWhileTheBindingIsNotSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, at := tokenAnswers(notYetBound, noRelationship, notYetBound)
		resp, err := request(context.Background(), client)
		require.NoError(t, err)
		require.Equal(t, "t", resp.Status.Token)
		require.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}, gaps(*at))
	})
}

func TestTokenRequestGivesUpAfterItsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lag := make([]error, objectcache.TokenCacheLagRetries+1)
		for i := range lag {
			lag[i] = notYetBound
		}
		client, at := tokenAnswers(lag...)
		_, err := request(context.Background(), client)
		require.True(t, apierrors.IsForbidden(err), "the last answer is returned: %v", err)
		require.Equal(t, notYetBound.Error(), err.Error())
		var want []time.Duration
		for w := objectcache.TokenCacheLagBackoff; len(want) < objectcache.TokenCacheLagRetries; w *= 2 {
			want = append(want, w)
		}
		require.Equal(t, want, gaps(*at))
	})
}

func TestTokenRequestOtherErrorsAreNotRetried(t *testing.T) {
	for name, answer := range map[string]error{
		"forbidden otherwise": apierrors.NewForbidden(saResource, "default", errors.New("the pod's UID does not match")),
		"not found":           apierrors.NewNotFound(saResource, "default"),
		"server error":        apierrors.NewInternalError(errors.New("boom")),
	} {
		t.Run(name, func(t *testing.T) {
			client, at := tokenAnswers(answer)
			_, err := request(context.Background(), client)
			require.Error(t, err)
			require.Equal(t, answer.Error(), err.Error())
			require.Len(t, *at, 1)
		})
	}
}

func TestTokenRequestRetryEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, at := tokenAnswers(notYetBound, notYetBound)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := request(ctx, client)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 5*time.Millisecond, time.Since(start), "it returned when its context ended, within the first wait")
		require.Len(t, *at, 1)
	})
}
