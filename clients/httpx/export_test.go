package httpx

// HarvestPage is harvestPage for the external tests (package httpx_test): a
// realistic listing body, big enough that a handler writing part of it goes
// out chunked.
var HarvestPage = harvestPage

// RetryAfter is retryAfter for the external tests.
var RetryAfter = retryAfter
