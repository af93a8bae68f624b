// Package jitter spreads delays so that many pods retried or resynced at the
// same moment do not wake up together.
package jitter

import (
	"math/rand/v2"
	"time"
)

// Up returns a duration in [d, d*(1+factor)), drawn uniformly. A d or factor
// of zero or less returns d unchanged. It is safe for concurrent use.
func Up(d time.Duration, factor float64) time.Duration {
	if d <= 0 || factor <= 0 {
		return d
	}
	return d + time.Duration(rand.Float64()*factor*float64(d))
}
