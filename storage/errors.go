package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"

	gcs "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

var (
	// ErrNotFound: the object does not exist (Get, GetRange, Size).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: PutIfAbsent lost; the existing object was left as it was.
	ErrAlreadyExists = errors.New("already exists")
	// ErrOutOfRange: GetRange asked for bytes past the end of the object.
	ErrOutOfRange = errors.New("range past end of object")
	// ErrInvalidKey: the key or prefix breaks the rules in the package comment.
	// (ErrChanged, ReplaceIfUnchanged's refusal, is in replace.go.)
	ErrInvalidKey = errors.New("invalid key")
)

// OpError is the only error type Store methods return, so callers can log which operation on
// which key failed and still route on the cause with errors.Is / errors.As.
type OpError struct {
	Op  string // failpoint op name: get, put_if_absent, list_dir, ...
	Key string // key or prefix as the caller passed it
	Err error
}

func (e *OpError) Error() string {
	return "storage " + e.Op + " " + strconv.Quote(e.Key) + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }

// ErrorKind is "corrupt" for a read of an object that is not there: callers read only keys
// that stored state names (a manifest, a data, deletion, index or checkpoint file), and a
// caller that may find a key absent asks GetIfExists or Exists instead. Such a read failing is
// damage an operator mends; retrying the work in place, or giving up on it, mends nothing. Any
// other failure has no kind here ("").
func (e *OpError) ErrorKind() string {
	switch e.Op {
	case opGet, opGetRange, opSize:
		if errors.Is(e.Err, ErrNotFound) {
			return "corrupt"
		}
	}
	return ""
}

// Operation names; also the suffix of the failpoint names.
const (
	opGet          = "get"
	opGetIfExists  = "get_if_exists"
	opGetRange     = "get_range"
	opSize         = "size"
	opExists       = "exists"
	opPut          = "put"
	opPutIfAbsent  = "put_if_absent"
	opList         = "list"
	opListDir      = "list_dir"
	opDelete       = "delete"
	opDeletePrefix = "delete_prefix"
	opReplace      = "replace"
)

// wrap turns any failure into an *OpError whose chain also holds the sentinel it stands for
// and, if the context is done, the context's error.
func wrap(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	if !failpoint.IsInjected(err) && !errors.Is(err, ErrInvalidKey) {
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrAlreadyExists), errors.Is(err, ErrOutOfRange):
		case isAbsent(err):
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		case op == opPutIfAbsent && isPreconditionFailed(err):
			err = fmt.Errorf("%w: %w", ErrAlreadyExists, err)
		case httpStatus(err) == http.StatusRequestedRangeNotSatisfiable:
			err = fmt.Errorf("%w: %w", ErrOutOfRange, err)
		}
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return &OpError{Op: op, Key: key, Err: err}
}

// isAbsent is stricter than gcerrors.NotFound because gocloud folds unrelated failures into
// that code: gcsblob maps HTTP 403 to NotFound and s3blob maps 301 (bucket in another region)
// to NotFound. A missing bucket or container is a configuration error, not an absent object.
func isAbsent(err error) bool {
	if errors.Is(err, syscall.ENOTDIR) {
		return true // local: a parent is a file, so nothing can exist below it
	}
	if gcerrors.Code(err) != gcerrors.NotFound {
		return false
	}
	if s := httpStatus(err); s != 0 && s != http.StatusNotFound {
		return false
	}
	if errors.Is(err, gcs.ErrBucketNotExist) {
		return false
	}
	var coded interface{ ErrorCode() string } // smithy.APIError (S3)
	if errors.As(err, &coded) && coded.ErrorCode() == "NoSuchBucket" {
		return false
	}
	var az *azcore.ResponseError
	if errors.As(err, &az) && az.ErrorCode == "ContainerNotFound" {
		return false
	}
	return true
}

func isPreconditionFailed(err error) bool {
	switch gcerrors.Code(err) {
	case gcerrors.FailedPrecondition, gcerrors.AlreadyExists:
		return true
	}
	return httpStatus(err) == http.StatusPreconditionFailed
}

// httpStatus digs the HTTP status out of the cloud SDKs' error types; 0 when there is none.
func httpStatus(err error) int {
	var aws interface{ HTTPStatusCode() int } // smithy-go transport ResponseError
	if errors.As(err, &aws) {
		return aws.HTTPStatusCode()
	}
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Code
	}
	var az *azcore.ResponseError
	if errors.As(err, &az) {
		return az.StatusCode
	}
	return 0
}

// Class is what retrying a failed store call can achieve.
type Class int

const (
	// Unclassified: not recognised as either; a caller retries it within a budget.
	Unclassified Class = iota
	// Transient: the store, or the way to it, is unwell (a timeout, a lost connection, a
	// full disk or quota, a read-only mount, throttling, a 5xx): the same call can succeed
	// later, and no other call would do better now.
	Transient
	// Refused: the store refuses this key for good (a key it does not accept, a name too long,
	// a permission error): the same call never succeeds.
	Refused
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Refused:
		return "refused"
	}
	return "unclassified"
}

// Classify sorts a failure of a Store method (or anything wrapping one) by what a retry can do.
// A read-only file system counts as transient: it is the whole root, not the key, and an
// operator remounting it lets the same write through. So does an I/O error (EIO), the disk's
// and not the key's, and a latched directory sync failure (ErrSyncFailed), whatever its errno:
// the same call succeeds in a new process once the disk is mended, and no other call would do
// better meanwhile.
func Classify(err error) Class {
	if err == nil {
		return Unclassified
	}
	if errors.Is(err, ErrSyncFailed) {
		return Transient
	}
	for _, e := range []error{ErrInvalidKey, syscall.ENAMETOOLONG, syscall.EACCES, syscall.EPERM} {
		if errors.Is(err, e) {
			return Refused
		}
	}
	for _, e := range []error{context.DeadlineExceeded, syscall.EIO, syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.ETIMEDOUT,
		syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.ECONNABORTED, syscall.EPIPE, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
		syscall.ENETDOWN, syscall.EAGAIN, syscall.EBUSY, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return Transient
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Transient
	}
	switch httpStatus(err) {
	case http.StatusForbidden, http.StatusBadRequest:
		return Refused
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Transient
	}
	switch gcerrors.Code(err) {
	case gcerrors.PermissionDenied, gcerrors.InvalidArgument:
		return Refused
	case gcerrors.ResourceExhausted, gcerrors.DeadlineExceeded:
		return Transient
	}
	return Unclassified
}
