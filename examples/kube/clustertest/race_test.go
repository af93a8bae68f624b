//go:build race

package clustertest_test

// raceEnabled says whether this test binary was built with -race.
const raceEnabled = true
