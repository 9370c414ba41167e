package store

import (
	"context"
	"io"
)

// Owed puts: a data file whose flush the commit that names it pays.
//
// A Delta commit is a data file put and then the log entry's PutIfAbsent.
// In syncfs rounds each of them waited for two rounds (one before its
// publish, one after), four per commit, every one of them on the commit's
// path. The data file's two are not needed for what durability promises: no name may point at bytes a
// crash can lose, and a data file is named only by the commit that follows
// it. The commit's round before its own publish started after the data
// file was written and renamed, and a syncfs flushes the whole filesystem:
// it makes the data file's bytes, its name and any directory its put
// created durable before the commit can name it. So PutOwed publishes the
// data file without waiting for a round, and the store keeps count of what
// it owes.
//
// The promise of PutOwed, on every store: its object is durable before any
// Put or PutIfAbsent of the same store that begins after PutOwed returned
// publishes its key (the commit's PutIfAbsent, the Delta writer's). A crash
// before that may lose it; nothing names it yet (an orphan for vacuum).
//
//   - Stores other than File, and a File writing per file (sync=file, or
//     sync=auto while it is per file): PutOwed is Put, durable when it
//     returns; nothing is owed.
//   - A File in rounds (sync=group, sync=auto while it uses them): the
//     temporary file is written and renamed into place with no flush and
//     no wait, the directories it created are left owed (as PrepareDir
//     leaves them), and the store's count of owed puts goes up after the
//     rename. Each round notes the count when it starts; a successful one
//     covers every put counted by then.
//   - A later write in rounds is covered by its own round before publishing
//     (it started after the write began, so after the owed rename) and waits
//     for nothing more; that round also ends the owed directories on its
//     path (healPath). A later write per file (sync=auto switched between
//     them) waits, before publishing, for a round that covers the count it
//     saw (settleOwed): one round, shared by every such write.
//   - A file the rounds do not cover (on another filesystem than the root's)
//     is put per file, durable when PutOwed returns.
//
// Rejected: a token per owed put handed to the commit (the Delta writer's
// data files and its commit are written by different calls, and any write
// of the store that follows covers them anyway: a count is all it takes);
// deferring per-file fsyncs to the commit (the same fsyncs, only later).

// PutOwed writes key like Put, but may leave its durability to the next
// write of the same store: see the promise above. The Delta writer's data
// files use it.
func PutOwed(ctx context.Context, s Store, key string, r io.Reader, size int64) error {
	target := s
	if sub, ok := s.(*subStore); ok {
		k, err := sub.key(key)
		if err != nil {
			return err
		}
		target, key = sub.inner, k
	}
	if f, ok := target.(*File); ok {
		return f.put(ctx, key, r, size, true)
	}
	return target.Put(ctx, key, r, size)
}

// publishOwed publishes an owed put's temporary file tmp, written for
// rounds (ps), as p: no round before or after.
func (f *File) publishOwed(key, p, tmp string, ps putSync) error {
	ps.note(stepWritten)
	// Its new directories are owed, like PrepareDir's: the next round of a
	// write below them ends them, or a per-file write below them fsyncs
	// their parents itself (awaitDir). No wait for other writes' creations
	// on the path either: they were made before this file was opened, so
	// before any round that covers it.
	for _, nd := range ps.made {
		finishDir(nd.dir, nd.c, errOwed)
	}
	if err := f.renameTemp(key, tmp, p); err != nil {
		return err
	}
	ps.g.owed.Add(1)
	ps.note(stepPublished)
	return nil
}

// settleOwed returns once every put this store left owed before the call
// is durable: at once when a finished round covers them (or nothing is
// owed), else after a round that starts now. A write per file calls it
// before publishing; a write in rounds needs no call (its own round
// covers them).
func (f *File) settleOwed(ctx context.Context) error {
	g := f.group
	if g == nil || g.covered.Load() >= g.owed.Load() {
		return nil
	}
	return g.wait(ctx)
}
