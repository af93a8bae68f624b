package kubeletserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
