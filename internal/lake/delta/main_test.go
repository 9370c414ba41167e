package delta

import (
	"os"
	"testing"

	"github.com/omlhq/oml/internal/lake/s3test"
)

// TestMain stops the shared S3 test server (started on first use) after
// the package's tests.
func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }
