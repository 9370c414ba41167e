package store_test

import (
	"os"
	"testing"

	"github.com/omlhq/oml/internal/lake/s3test"
)

func TestMain(m *testing.M) {
	if os.Getenv(raceChildEnv) != "" {
		os.Exit(raceChild())
	}
	os.Exit(s3test.Main(m))
}
