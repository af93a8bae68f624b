// Package jitter spreads delays so that many pods retried or resynced at the
// same moment do not wake up together.
package jitter

import (
	"math"
	"math/rand/v2"
	"time"
)

// Up returns a duration in [d, d*(1+factor)), drawn uniformly. A d or factor
// of zero or less (or a NaN factor) returns d unchanged. A result beyond the
// largest time.Duration is that largest Duration: Up saturates, it never
// overflows into a negative or short delay. It is safe for concurrent use.
func Up(d time.Duration, factor float64) time.Duration {
	if d <= 0 || !(factor > 0) {
		return d
	}
	extra := rand.Float64() * factor * float64(d)
	// float64(math.MaxInt64) is 2^63: below it the conversion is exact
	// enough and defined; the integer comparison then rules out d+e
	// overflowing.
	if !(extra < float64(math.MaxInt64)) {
		return math.MaxInt64
	}
	e := time.Duration(extra)
	if e > math.MaxInt64-d {
		return math.MaxInt64
	}
	return d + e
}
