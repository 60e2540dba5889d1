package awscloud

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Error is a failed AWS call, classified. It names the IAM action that failed (e.g. "eks:CreateCluster"),
// so that an access denied error says which permission to grant.
type Error struct {
	// Action is the IAM action of the call, e.g. "eks:CreateCluster".
	Action string
	// Code is AWS's error code, e.g. "AccessDeniedException" or "Throttling".
	Code string
	// Message is AWS's message.
	Message string
	// Retryable says whether the same call may succeed later (throttling, a server error, a resource
	// still changing, the network); otherwise the call will fail again until something changes.
	Retryable bool
	// AccessDenied says the credentials lack the permission for Action.
	AccessDenied bool

	err error
}

func (e *Error) Error() string {
	switch {
	case e.AccessDenied:
		return fmt.Sprintf("access denied to %s: %s (grant the action to the cloud account's identity)", e.Action, e.Message)
	case e.Code != "":
		return fmt.Sprintf("%s: %s: %s", e.Action, e.Code, e.Message)
	default:
		return fmt.Sprintf("%s: %v", e.Action, e.err)
	}
}

func (e *Error) Unwrap() error { return e.err }

// Codes that say to retry later: throttling, server-side trouble, and resources still changing.
var retryableCodes = map[string]bool{
	"Throttling": true, "ThrottlingException": true, "ThrottledException": true, "RequestThrottled": true,
	"RequestThrottledException": true, "TooManyRequestsException": true, "RequestLimitExceeded": true,
	"SlowDown": true, "PriorRequestNotComplete": true, "ProvisionedThroughputExceededException": true,
	"ServiceUnavailable": true, "ServiceUnavailableException": true, "InternalError": true, "InternalFailure": true,
	"ServerException": true, "RequestTimeout": true, "RequestTimeoutException": true,
	"ResourceInUseException": true, "DependencyViolation": true, "DeleteConflict": true,
	"InvalidDBInstanceState": true, "InvalidDBSubnetGroupStateFault": true, "IncorrectState": true,
	"OperationAborted": true, "ConcurrentModification": true, "ConcurrentModificationException": true,
}

// Codes that say the credentials may not do what was asked.
var accessDeniedCodes = map[string]bool{
	"AccessDenied": true, "AccessDeniedException": true, "UnauthorizedOperation": true, "UnauthorizedAccess": true,
	"AuthorizationError": true, "Forbidden": true,
}

// Codes that say the credentials themselves are wrong: permanent, like a denial.
var badCredentialCodes = map[string]bool{
	"InvalidClientTokenId": true, "UnrecognizedClientException": true, "SignatureDoesNotMatch": true,
	"AuthFailure": true, "InvalidAccessKeyId": true, "ExpiredToken": true, "ExpiredTokenException": true,
}

// Codes of a resource that does not exist.
var notFoundCodes = map[string]bool{
	"NoSuchEntity": true, "ResourceNotFoundException": true, "NotFound": true, "NoSuchBucket": true,
	"InvalidVpcID.NotFound": true, "InvalidSubnetID.NotFound": true, "DBInstanceNotFound": true,
	"DBInstanceNotFoundFault": true, "DBSubnetGroupNotFoundFault": true, "NoSuchHostedZone": true, "NoSuchTagSet": true,
}

// Classify wraps an error returned by an SDK call in an *Error naming its action and saying whether
// it is retryable. nil stays nil; an error already classified is returned as is.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	e := &Error{err: err, Action: "aws"}
	// The innermost operation is the one that failed: a call whose credentials come from STS
	// AssumeRole fails as that AssumeRole.
	for x := err; x != nil; {
		var oe *smithy.OperationError
		if !errors.As(x, &oe) {
			break
		}
		e.Action = iamPrefix(oe.ServiceID) + ":" + oe.OperationName
		x = oe.Err
	}
	var ae smithy.APIError
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	switch {
	case errors.As(err, &ae):
		e.Code, e.Message = ae.ErrorCode(), ae.ErrorMessage()
		if e.Message == "" {
			e.Message = e.Code
		}
		switch {
		case accessDeniedCodes[e.Code]:
			e.AccessDenied = true
		case badCredentialCodes[e.Code]:
		case retryableCodes[e.Code], ae.ErrorFault() == smithy.FaultServer && !notFoundCodes[e.Code]:
			e.Retryable = true
		case status == http.StatusTooManyRequests || status >= 500:
			e.Retryable = true
		}
	case status == http.StatusForbidden:
		e.AccessDenied, e.Code, e.Message = true, "AccessDenied", http.StatusText(status)
	case status == http.StatusNotFound:
		e.Code, e.Message = "NotFound", http.StatusText(status)
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout:
		e.Code, e.Message = fmt.Sprint(status), http.StatusText(status)
	default:
		// No answer (the network, a timeout) or a server error: try again later.
		e.Retryable = true
	}
	return e
}

// IsRetryable reports whether err is a classified AWS error worth retrying, or any error that is not
// a classified AWS error (the network, a cancelled context: the caller's backoff decides).
func IsRetryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retryable
	}
	return err != nil
}

// IsAccessDenied reports whether err is an AWS access denied error.
func IsAccessDenied(err error) bool {
	var e *Error
	return errors.As(Classify(err), &e) && e.AccessDenied
}

// IsNotFound reports whether err says that the resource does not exist.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(Classify(err), &e) && notFoundCodes[e.Code]
}

// IsCode reports whether err is an AWS error with that code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(Classify(err), &e) && e.Code == code
}

// iamPrefix is the IAM action prefix of an SDK service id ("Route 53" is "route53").
func iamPrefix(serviceID string) string {
	return strings.ToLower(strings.ReplaceAll(serviceID, " ", ""))
}
