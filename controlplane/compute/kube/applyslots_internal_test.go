package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestApplySlots checks the per-cluster bound on applies in flight: while every slot is taken TryApply
// answers ErrClusterBusy at once and Apply waits until its context ends; a freed slot is taken again.
func TestApplySlots(t *testing.T) {
	cl := &Cluster{ApplyConcurrency: 1}
	ctx := context.Background()
	owner := Owner{InstanceID: "inst-slots"}
	release, err := cl.applySlot(ctx, false)
	require.NoError(t, err)

	_, err = TryApply(ctx, cl, owner, nil)
	require.ErrorIs(t, err, ErrClusterBusy, "the only slot is taken")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = Apply(short, cl, owner, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Apply waits for a slot until its context ends")

	release()
	_, err = TryApply(ctx, cl, owner, nil)
	require.NoError(t, err, "the freed slot is taken again")
	_, err = TryApply(ctx, cl, owner, nil)
	require.NoError(t, err, "and given back when the apply is done")
}
