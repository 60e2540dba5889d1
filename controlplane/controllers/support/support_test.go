package support_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/controlplane/controllers/support"
)

func TestName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "cert-manager-eu-west", support.Name("cert-manager", "eu-west"))
	long := support.Name("cert-manager", strings.Repeat("r", 60))
	require.LessOrEqual(t, len(long), 63, "a DNS label")
	require.False(t, strings.HasSuffix(long, "-"))
	require.Equal(t, long, support.Name("cert-manager", strings.Repeat("r", 60)), "the same for every gateway, so that they meet on it")
}
