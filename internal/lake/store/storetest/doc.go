// Package storetest is the conformance suite every store.Store backend must
// pass: the same behaviour, error for error, on the local filesystem, in
// memory, behind the fault injector and on a real S3 server. A backend's
// test calls Run with a constructor that returns a fresh, empty store.
package storetest
