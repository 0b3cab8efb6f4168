package file

import (
	"fmt"
	"strings"
)

// Version is a Lance data file format version as datasets name it ("2.0", "2.1", "2.2"): the
// manifest's data_format.version and a fragment's file_major_version/file_minor_version. A 2.0
// file says 0.3 in its own footer; 2.1 and later files say their version there.
type Version struct{ Major, Minor uint32 }

// The versions this package knows by name. Lance calls 2.0 "legacy"-compatible "stable" in
// older engines; what an engine picks by default moved from 2.0 to 2.1 (Lance 8, 10) to 2.2
// (Lance 12), and the reference OmniGraph pins 2.2.
var (
	V2_0 = Version{2, 0}
	V2_1 = Version{2, 1}
	V2_2 = Version{2, 2}
)

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// IsZero reports the unset Version, which Options read as V2_0.
func (v Version) IsZero() bool { return v == Version{} }

// ParseVersion reads a version as a manifest or a setting spells it. It accepts any
// "major.minor"; whether this package can read or write that version is Readable's and
// Writable's answer, so a caller can name an unknown version in its own error.
func ParseVersion(s string) (Version, error) {
	var v Version
	major, minor, ok := strings.Cut(strings.TrimSpace(s), ".")
	if !ok {
		return v, fmt.Errorf("lance file version %q: want major.minor, such as 2.2", s)
	}
	if _, err := fmt.Sscan(major, &v.Major); err != nil {
		return v, fmt.Errorf("lance file version %q: major %q is not a number", s, major)
	}
	if _, err := fmt.Sscan(minor, &v.Minor); err != nil {
		return v, fmt.Errorf("lance file version %q: minor %q is not a number", s, minor)
	}
	if v.String() != strings.TrimSpace(s) {
		return Version{}, fmt.Errorf("lance file version %q: want major.minor, such as 2.2", s)
	}
	return v, nil
}

// writable lists the versions Writer can produce. A dataset never receives files of a version
// its manifest does not declare (lance refuses such a table from Lance 12 on), so anything not
// listed here must be refused before a file is encoded.
var writable = map[Version]bool{V2_0: true, V2_1: true, V2_2: true}

// readable lists the versions Open can decode.
var readable = map[Version]bool{V2_0: true, V2_1: true, V2_2: true}

// Writable reports whether Writer can produce files of version v.
func Writable(v Version) bool { return writable[v] }

// Readable reports whether Open can decode files of version v.
func Readable(v Version) bool { return readable[v] }

// UnsupportedVersionError refuses a file version this package cannot read or write.
type UnsupportedVersionError struct {
	Version Version
	Op      string // "read" or "write"
}

func (e *UnsupportedVersionError) Error() string {
	ok := Readable
	if e.Op == "write" {
		ok = Writable
	}
	return fmt.Sprintf("lance file version %s: this build cannot %s it (it %ss %s)", e.Version, e.Op, e.Op, Versions(ok))
}

// ErrorKind is "data_version": another build (or none yet) reads or writes this version.
// Callers that route errors by a kind string use it.
func (e *UnsupportedVersionError) ErrorKind() string { return "data_version" }

// Known are the versions this package knows by name, oldest first.
var Known = []Version{V2_0, V2_1, V2_2}

// Versions lists the known versions ok accepts (Readable, Writable, or a caller's own test),
// for errors: "2.0, 2.1, 2.2".
func Versions(ok func(Version) bool) string {
	var names []string
	for _, v := range Known {
		if ok(v) {
			names = append(names, v.String())
		}
	}
	return strings.Join(names, ", ")
}
