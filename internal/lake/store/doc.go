// Package store is the lake's object-store seam: one small interface (Store)
// with a local-filesystem backend (file://), an S3 backend (s3://, through
// aws-sdk-go-v2), an in-memory crashable backend for crash tests, and an
// error-injecting wrapper for fault tests. One conformance suite runs against
// every backend.
//
// The commit primitive is PutIfAbsent. On S3 it is a PUT with
// If-None-Match: * (a 412 means someone else won); on a local filesystem it is
// an exclusive create of a temporary file followed by link(2) to the final
// name — never rename(2), which would silently overwrite a winner.
package store
