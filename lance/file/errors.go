package file

import (
	"errors"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

// FormatError reports a data file that cannot be decoded: truncated, corrupted, foreign, or using
// an encoding this package does not implement. Every problem found in the bytes of a file is
// reported as a *FormatError (use errors.As); I/O errors from the Source are passed through.
type FormatError struct {
	File   string
	Offset int64 // position in the file the problem was found at, -1 when no single offset is to blame
	Reason string
	// Err, when set, is the routable cause (an *UnsupportedVersionError), for errors.As.
	Err error
}

func (e *FormatError) Error() string {
	reason := e.Reason
	if e.Err != nil {
		reason += ": " + e.Err.Error()
	}
	if e.Offset >= 0 {
		return fmt.Sprintf("lance file %s: at byte %d: %s", e.File, e.Offset, reason)
	}
	return fmt.Sprintf("lance file %s: %s", e.File, reason)
}

func (e *FormatError) Unwrap() error { return e.Err }

// ErrorKind is "data_version" when the file is of a version this package does not read (the
// routable cause), otherwise "corrupt": the bytes are the file's fault and no retry reads them
// differently. Callers that route errors by a kind string use it.
func (e *FormatError) ErrorKind() string {
	var uv *UnsupportedVersionError
	if errors.As(e.Err, &uv) {
		return uv.ErrorKind()
	}
	return "corrupt"
}

// decodeError is what the page decoders return: they know what is wrong but not which file or
// page they are looking at. The reader turns it into a FormatError with the page's location.
type decodeError struct{ reason string }

func (e *decodeError) Error() string { return e.reason }

func errf(format string, args ...any) error {
	return &decodeError{reason: fmt.Sprintf(format, args...)}
}

// asFormatError attaches file and offset to a decoding error. Errors that already are
// FormatErrors, and errors that are not about the bytes (I/O, context), are returned unchanged.
func asFormatError(err error, file string, off int64, context string) error {
	if err == nil {
		return nil
	}
	var fe *FormatError
	if errors.As(err, &fe) {
		return err
	}
	var de *decodeError
	if errors.As(err, &de) {
		return &FormatError{File: file, Offset: off, Reason: context + de.reason}
	}
	if errors.Is(err, pb.ErrMalformed) {
		return &FormatError{File: file, Offset: off, Reason: context + err.Error()}
	}
	return err
}
