// Package s3test starts a real S3-compatible server (Versity Gateway,
// versitygw, with its posix backend) on 127.0.0.1 for tests, and hands out a
// fresh bucket per test as a store.S3 plus the environment a child process
// needs to reach it.
//
// The server is started once per test binary, on first use, and stopped by
// Main (call it from TestMain). The binary comes from $OML_VERSITYGW (the
// Makefile sets it), else from scripts/ensure-versitygw.sh, which builds it
// once into ~/.cache/oml. When it cannot be had, tests are skipped with a
// loud message — except when CI=true, where they fail: CI must prove the S3
// path.
//
// The server's data directory is a temporary directory on a filesystem with
// extended attributes (versitygw stores ETags in xattrs, and the
// If-None-Match check reads them; it is never started with --nometa).
package s3test
