package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Unavailable reports whether err says the database could not be reached or is not accepting work
// right now, so that the request may succeed when retried: the connection was refused or reset, or timed
// out; the driver gave up on a bad connection; or PostgreSQL answered with SQLSTATE class 08 (connection
// exception), 53300 (too many connections) or 57P01-57P03 (shutting down, crashed, starting up).
// PostgreSQL errors are recognised by their SQLSTATE field (the driver's Field('C')). The API answers
// such errors with 503, and a process starting waits them out.
func Unavailable(err error) bool {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	var pg interface{ Field(byte) string }
	if errors.As(err, &pg) {
		code := pg.Field('C')
		return strings.HasPrefix(code, "08") || code == "53300" || code == "57P01" || code == "57P02" || code == "57P03"
	}
	return false
}
