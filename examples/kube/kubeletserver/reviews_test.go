package kubeletserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// A cached review answers until its expiry, and the cache stays within
// maxCachedReviews however many keys clients bring.
func TestReviewCacheExpiresAndIsBounded(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	c := newReviewCache[int]()
	c.now = clock.Now
	c.put("a", 1, time.Minute)
	v, ok := c.get("a")
	assert.True(t, ok)
	assert.Equal(t, 1, v)
	clock.Step(time.Minute)
	_, ok = c.get("a")
	assert.False(t, ok, "an answer is not used past its expiry")

	for i := range 3 * maxCachedReviews {
		c.put(fmt.Sprint(i), i, time.Hour)
		assert.LessOrEqual(t, len(c.entries), maxCachedReviews)
	}
	v, ok = c.get(fmt.Sprint(3*maxCachedReviews - 1))
	assert.True(t, ok, "the newest answer is kept")
	assert.Equal(t, 3*maxCachedReviews-1, v)
}

// Requests for a key not cached yet share one review (a burst of requests
// with a new token must not become a burst of TokenReviews), and a
// failed review is not cached.
func TestReviewCacheSharesAReviewUnderWay(t *testing.T) {
	c := newReviewCache[int]()
	release := make(chan struct{})
	var reviews atomic.Int32
	review := func() (int, time.Duration, error) {
		reviews.Add(1)
		<-release
		return 7, time.Minute, nil
	}
	var wg sync.WaitGroup
	results := make(chan int, 20)
	go func() {
		v, err := c.do(context.Background(), "k", review)
		assert.NoError(t, err)
		results <- v
	}()
	// The first review is under way once it is in flight.
	require.Eventually(t, func() bool { return reviews.Load() == 1 }, time.Minute, time.Millisecond)
	for range 19 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.do(context.Background(), "k", review)
			assert.NoError(t, err)
			results <- v
		}()
	}
	close(release)
	wg.Wait()
	for range 20 {
		assert.Equal(t, 7, <-results)
	}
	assert.Equal(t, int32(1), reviews.Load(), "one review for the burst (the answer is cached before the review leaves the in-flight set)")

	_, err := c.do(context.Background(), "bad", func() (int, time.Duration, error) { return 0, time.Minute, errors.New("unreachable") })
	require.Error(t, err)
	_, ok := c.get("bad")
	assert.False(t, ok, "a failed review is not cached")
}
