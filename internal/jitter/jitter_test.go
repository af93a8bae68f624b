package jitter

import (
	"math"
	"testing"
	"time"
)

func TestUpStaysInRange(t *testing.T) {
	const d = 10 * time.Second
	seen := map[bool]bool{}
	for range 10000 {
		got := Up(d, 0.5)
		if got < d || got >= d+d/2 {
			t.Fatalf("Up(%v, 0.5) = %v, want in [%v, %v)", d, got, d, d+d/2)
		}
		seen[got > d+d/4] = true
	}
	if !seen[true] || !seen[false] {
		t.Fatalf("10000 draws never landed in both halves of the range: %v", seen)
	}
}

func TestUpLeavesNonPositiveAlone(t *testing.T) {
	for _, c := range []struct {
		d time.Duration
		f float64
	}{{0, 0.5}, {-time.Second, 0.5}, {time.Second, 0}, {time.Second, -1}} {
		if got := Up(c.d, c.f); got != c.d {
			t.Errorf("Up(%v, %v) = %v, want %v", c.d, c.f, got, c.d)
		}
	}
}

// A huge d saturates at the largest Duration rather than wrapping around
// into a negative (due at once) delay.
func TestUpSaturates(t *testing.T) {
	for _, c := range []struct {
		d time.Duration
		f float64
	}{
		{math.MaxInt64, 0.5},
		{math.MaxInt64 / 2, 1.5},
		{math.MaxInt64 - 1, 1e-9},
		{time.Second, math.Inf(1)},
		{time.Hour, 1e300},
	} {
		for range 1000 {
			got := Up(c.d, c.f)
			if got < c.d {
				t.Fatalf("Up(%d, %v) = %d, below d: it overflowed", c.d, c.f, got)
			}
		}
	}
	if got := Up(math.MaxInt64, 0.5); got != math.MaxInt64 {
		t.Fatalf("Up(MaxInt64, 0.5) = %d, want MaxInt64", got)
	}
	if got := Up(time.Second, math.Inf(1)); got != math.MaxInt64 {
		t.Fatalf("Up(1s, +Inf) = %d, want MaxInt64", got)
	}
}

func TestUpIgnoresANaNFactor(t *testing.T) {
	if got := Up(time.Second, math.NaN()); got != time.Second {
		t.Fatalf("Up(1s, NaN) = %v, want 1s", got)
	}
}
