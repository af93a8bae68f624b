package jitter

import (
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
