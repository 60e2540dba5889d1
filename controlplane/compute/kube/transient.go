package kube

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Transient reports whether err is one that retrying may cure without a spec change: the cluster
// cannot be reached (connection refused or reset, a timeout, a name that does not resolve yet, its
// probe found it not answering: ErrUnreachable) or it
// answered 429 or 5xx. Credentials that are refused (401, 403) and certificates that do not verify
// are not transient: only a new spec (or a change in the cluster) fixes them.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
	)
	switch {
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err),
		errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid):
		return false
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return true
	case errors.Is(err, ErrUnreachable), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}
