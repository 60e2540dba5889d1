package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Error codes carried over the wire. The server maps each to one HTTP status, and the client maps back.
const (
	CodeInvalid      = "invalid"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	CodeTooLarge     = "too_large"
	CodeUnavailable  = "unavailable"
	CodeInternal     = "internal"
)

var codeStatus = map[string]int{
	CodeInvalid:      http.StatusBadRequest,
	CodeUnauthorized: http.StatusUnauthorized,
	CodeForbidden:    http.StatusForbidden,
	CodeNotFound:     http.StatusNotFound,
	CodeConflict:     http.StatusConflict,
	CodeTooLarge:     http.StatusRequestEntityTooLarge,
	CodeUnavailable:  http.StatusServiceUnavailable,
	CodeInternal:     http.StatusInternalServerError,
}

// HTTPStatus returns the HTTP status for an error code (500 for unknown codes).
func HTTPStatus(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// CodeForStatus returns the error code for an HTTP status.
func CodeForStatus(status int) string {
	for c, s := range codeStatus {
		if s == status {
			return c
		}
	}
	switch {
	case status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		return CodeUnavailable // a proxy in front of a control plane that is not there
	case status >= 500:
		return CodeInternal
	}
	return CodeInvalid
}

// FieldError names one invalid field and why.
type FieldError struct {
	// Field is the JSON path, e.g. "spec.containers[0].image".
	Field string `json:"field"`
	// Message says what is wrong with it.
	Message string `json:"message"`
}

// ObjectRef identifies an object.
type ObjectRef struct {
	// Kind is the singular kind.
	Kind string `json:"kind"`
	// ID is the object id.
	ID string `json:"id"`
	// Name is the object name.
	Name string `json:"name,omitempty"`
}

func (r ObjectRef) String() string { return fmt.Sprintf("%s %q", r.Kind, r.Name) }

// Error is the one API error type. It travels over the wire as {"error": {...}}.
type Error struct {
	// Code is one of the Code* constants.
	Code string `json:"code"`
	// Message is a human-readable summary.
	Message string `json:"message"`
	// Field is the first invalid field, for validation errors.
	Field string `json:"field,omitempty"`
	// Fields lists every invalid field, for validation errors.
	Fields []FieldError `json:"fields,omitempty"`
	// Dependents lists the objects that block a delete.
	Dependents []ObjectRef `json:"dependents,omitempty"`
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if len(e.Dependents) > 0 {
		refs := make([]string, len(e.Dependents))
		for i, d := range e.Dependents {
			refs[i] = d.String()
		}
		b.WriteString(": ")
		b.WriteString(strings.Join(refs, ", "))
	}
	return b.String()
}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns a validation error for the given field errors.
func Invalid(fields ...FieldError) *Error {
	e := &Error{Code: CodeInvalid, Fields: fields}
	if len(fields) > 0 {
		e.Field = fields[0].Field
		e.Message = fields[0].Field + ": " + fields[0].Message
		if len(fields) > 1 {
			e.Message += fmt.Sprintf(" (and %d more)", len(fields)-1)
		}
	}
	return e
}

// ErrorCode returns the code of an *Error in err's chain, or "" when there is none.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound reports whether err is an API not-found error.
func IsNotFound(err error) bool { return ErrorCode(err) == CodeNotFound }

// IsConflict reports whether err is an API conflict (name taken, stale If-Match, dependents exist).
func IsConflict(err error) bool { return ErrorCode(err) == CodeConflict }

// IsInvalid reports whether err is a validation error.
func IsInvalid(err error) bool { return ErrorCode(err) == CodeInvalid }

// IsUnauthorized reports whether err is a missing or wrong token.
func IsUnauthorized(err error) bool { return ErrorCode(err) == CodeUnauthorized }

// IsForbidden reports whether the token's role may not do this.
func IsForbidden(err error) bool { return ErrorCode(err) == CodeForbidden }
