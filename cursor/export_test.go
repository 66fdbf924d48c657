package cursor

// The retention statements, for the test that checks their plans.
var SQLPruneIdle, SQLPruneExpired = sqlPruneIdle, sqlPruneExpired

// IdleRun is the idle predicate, for the benchmark's one-statement baseline.
const IdleRun = idleRun
