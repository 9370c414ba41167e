package e2e_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// `make demo` installs only what the demo needs: the demo runs on a file://
// lake, so building the S3 test server (minutes on a fresh machine) is not
// part of it; `make deps` (tests) still builds it.
func TestMakeDemo_DoesNotBuildTheS3Server(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is not installed: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..")
	dryRun := func(target string) string {
		cmd := exec.Command("make", "-n", target)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	demo := dryRun("demo")
	require.Contains(t, demo, "scripts/ensure-postgres.sh")
	require.Contains(t, demo, "scripts/demo.sh")
	require.NotContains(t, demo, "ensure-versitygw")
	require.Contains(t, dryRun("deps"), "ensure-versitygw")
}
