package cursor

// The retention statements, for the test that checks their plans.
var SQLPruneIdle, SQLPruneExpired, SQLAbandonRuns = sqlPruneIdle, sqlPruneExpired, sqlAbandonRuns

// IdleRun is the idle predicate, for the benchmark's one-statement baseline.
const IdleRun = idleRun
