package cursor

// The retention statements, for the test that checks their plans.
var SQLPruneIdle, SQLPruneExpired = sqlPruneIdle, sqlPruneExpired
