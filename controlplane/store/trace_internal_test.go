package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMethodNameNamesTheStoreMethodOfATransaction(t *testing.T) {
	t.Parallel()
	for full, want := range map[string]string{
		"github.com/qleetos/terraform-provider-qleet/controlplane/store.(*bunStore).Create":             "Create",
		"github.com/qleetos/terraform-provider-qleet/controlplane/store.(*bunStore).UpdateStatus.func1": "UpdateStatus",
		"github.com/qleetos/terraform-provider-qleet/controlplane/store.(*bunStore).List.func2.func1":   "List",
	} {
		require.Equal(t, want, methodName(full), full)
	}
}
