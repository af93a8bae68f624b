//go:build race

package kube_test

// raceEnabled says whether this test binary was built with -race.
const raceEnabled = true
