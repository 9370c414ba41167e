// Package backoff is the one exponential backoff of oml: the lake writer
// between retries of an outage or a poison row, the Delta writer reading
// back an ambiguous commit, and the S3 store retrying a request. Each
// keeps its own bounds and jitter (they were measured and tested with
// them); the doubling, the cap and the wait live here once.
package backoff
