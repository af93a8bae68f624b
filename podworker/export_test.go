package podworker

// StallPeriod is stallPeriod, for the tests of the package's users' view
// (package podworker_test).
const StallPeriod = stallPeriod
