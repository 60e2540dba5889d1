package main

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubesim plays a volume provisioner: every PersistentVolumeClaim that waits for a volume gets a
// PersistentVolume of its size and access modes, bound to it (kube-controller-manager's binder then binds
// the claim). No data is written anywhere: no container runs. A volume goes with its claim.

// labelProvisioned marks the volumes kubesim made.
const labelProvisioned = "kubesim.qleet.io/provisioned"

func syncVolumes(ctx context.Context, cs kubernetes.Interface) error {
	claims, err := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" || c.DeletionTimestamp != nil {
			continue
		}
		class := ""
		if c.Spec.StorageClassName != nil {
			class = *c.Spec.StorageClassName
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + string(c.UID), Labels: map[string]string{labelProvisioned: "true"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
				AccessModes:                   c.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              class,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: filepath.Join("/kubesim/volumes", c.Namespace, c.Name)}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("volume for %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	// Volumes whose claim is gone go too (no reclaimer runs for hostPath volumes here).
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: labelProvisioned})
	if err != nil {
		return err
	}
	for _, pv := range pvs.Items {
		if pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed {
			if err := cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}
