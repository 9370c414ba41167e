package workload_test

import (
	"testing"

	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }
