package store

import (
	"testing"

	"github.com/qleetos/terraform-provider-qleet/internal/pgtest"
)

// TestMain stops the PostgreSQL test server, if a test started one, when the tests are done.
func TestMain(m *testing.M) { pgtest.Main(m) }
