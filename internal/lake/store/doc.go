// Package store is the lake's object-store seam: one small interface (Store)
// with a local-filesystem backend (File, file://), an S3 backend (S3, s3://,
// through aws-sdk-go-v2), an in-memory crashable backend (Mem) for crash
// tests, and an error-injecting wrapper (Faulty) for fault tests. One
// conformance suite (storetest.Run) runs against every backend, so they agree
// error for error. Open turns a lake URL into a Store; Sub scopes a Store to
// a key prefix (a table is a Sub of the lake root); Probe checks that a store
// really honors put-if-absent.
//
// # Invariants
//
//   - PutIfAbsent is the commit primitive: of any number of concurrent
//     callers for one key, in any number of processes, exactly one succeeds
//     and the others get ErrExists; an existing object is never overwritten.
//     On S3 it is a PUT with If-None-Match: * (412 → ErrExists). On a local
//     filesystem it is a fully written, fsynced temporary file published with
//     link(2) (EEXIST → ErrExists) — never rename(2), which would silently
//     replace a winner.
//   - Every write is whole: readers see the old object or all of the new one.
//     Put is temp file + flush + rename locally, one PutObject or a multipart
//     upload (visible only at CompleteMultipartUpload) on S3.
//   - An acknowledged write is durable. The file store flushes each write in
//     one of two modes (FileSync, the lake URL's ?sync=; a URL without it
//     gets sync=auto, which picks one per write, autosync.go): per file
//     (NewFile's default) it
//     fsyncs the temporary file before publishing it, the directory it was
//     published in after, and every directory it had to create into its
//     parent (a directory's fsync is shared by the writes that need one of
//     it at the same time, dirsync.go; PrepareDir leaves a new directory's
//     to the next write below it or the next fsync of its parent); in group
//     mode (groupsync.go) it waits, before publishing, for a
//     syncfs(2) of the root's filesystem that started after the file was
//     written and, before acknowledging, for one that started after the
//     publish (which also covers the directories it created), sharing each
//     syncfs with every write waiting at the time. A file on another
//     filesystem than the root's is flushed per file in either mode. The
//     one write acknowledged before it is durable is PutOwed's (the Delta
//     writer's data files): in rounds it waits for none, and it is durable
//     before any later Put or PutIfAbsent of the same store publishes
//     (owed.go), which is all a data file needs: only the commit after it
//     names it.
//     Either way, a write into a directory that another goroutine of the
//     process is still creating waits for that directory to be durable in
//     its parent before publishing (and fails, publishing nothing, if its
//     flush failed; filedir.go). Per file, a second process writing into a
//     directory this one has just created is not covered: one lake writer
//     at a time creates the lake's tables (docs/object-stores.md names the
//     one exception, a new tenant's witness directory).
//   - A write whose outcome is unknown (a timeout or a lost connection after
//     the request was sent, a 5xx) is reported as ErrAmbiguous and is never
//     retried into a different answer: a blind retry of a conditional write
//     can report "someone else won" for our own write. The caller resolves it
//     by reading the key back (the Delta layer compares the commit it finds
//     with the one it wrote).
//   - Keys are clean relative '/'-separated paths (ValidateKey); every
//     backend refuses the same bad keys, so nothing escapes the root.
//   - List is recursive below the prefix, in byte order of the keys (S3's
//     order, not a directory walk's), and never shows the file backend's
//     temporary files (.NAME.RANDOM.oml-tmp).
//
// # Failure handling
//
// Backends retry what certainly did not happen (throttling, 503, refused
// connections) with jittered exponential backoff, bounded attempts and the
// caller's context; what reaches the caller is success, a sentinel error
// (ErrNotFound, ErrExists, ErrAmbiguous, ErrUnsupported, ErrInvalidKey) or a
// terminal error. See docs/object-stores.md for the operator's view.
package store
