package store

import "testing"

// TestConcurrency_FileFewS3Many: the lake writer's parallelism follows the
// store under every wrapper it is used through (a table's prefix, the
// fault injector): a local disk gets a few requests at once, S3 many, and
// a store that does not say gets the file default; a file store whose
// writes share their flushes (group sync) gets more, since each syncfs
// then serves more of them.
func TestConcurrency_FileFewS3Many(t *testing.T) {
	t.Parallel()
	f, err := NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	group, err := NewFile(t.TempDir(), WithSync(SyncGroup))
	if err != nil {
		t.Fatal(err)
	}
	s3 := &S3{}
	for _, c := range []struct {
		name string
		s    Store
		want int
	}{
		{"file", f, FileConcurrency},
		{"file table", MustSub(f, "t/bronze/events"), FileConcurrency},
		{"file group sync", group, FileGroupConcurrency},
		{"file group sync table", MustSub(group, "t/bronze/events"), FileGroupConcurrency},
		{"s3", s3, S3Concurrency},
		{"s3 table", &subStore{inner: s3, prefix: "t/bronze/events/"}, S3Concurrency},
		{"s3 faulty", NewFaulty(s3), S3Concurrency},
		{"mem", NewMem(), FileConcurrency},
	} {
		if got := Concurrency(c.s); got != c.want {
			t.Errorf("%s: Concurrency = %d, want %d", c.name, got, c.want)
		}
	}
	if FileConcurrency >= S3Concurrency {
		t.Errorf("S3 (%d) must get more requests at once than a local disk (%d)", S3Concurrency, FileConcurrency)
	}
}
