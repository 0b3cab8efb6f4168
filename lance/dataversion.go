package lance

import (
	"fmt"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

// A dataset declares one data file version in its manifest (data_format.version), and every
// data file of every fragment must be of that version: from Lance 12 on, the official engine
// refuses a table that mixes versions unless it was created with mixed versions allowed, and it
// refuses it at every version, old ones included. So no write path here may produce a file of
// another version than the one declared: it writes the declared version or refuses before a
// single file is encoded.

// DataVersionError refuses an operation on a dataset whose declared data file version this
// build cannot produce (Op "write") or decode (Op "read"), or a commit whose new data files are
// of another version than the dataset declares (Op "commit"). Nothing was written.
type DataVersionError struct {
	Dataset  string
	Op       string // "write", "read" or "commit"
	Declared string // the manifest's data_format.version ("" for a legacy dataset without one)
	// Files is the version the refused operation would have written or found: for "write" and
	// "read" the versions this build supports, for "commit" the offending file's.
	Files string
}

func (e *DataVersionError) Error() string {
	declared := e.Declared
	if declared == "" {
		declared = "legacy (unset)"
	}
	switch e.Op {
	case "commit":
		return fmt.Sprintf("lance: %s: declares data file version %s but the commit adds files of version %s; refusing to mix versions in one table", e.Dataset, declared, e.Files)
	case "read":
		return fmt.Sprintf("lance: %s: declares data file version %s; this build reads data files of version %s only", e.Dataset, declared, e.Files)
	}
	return fmt.Sprintf("lance: %s: declares data file version %s; this build writes data files of version %s only and refuses to mix versions in one table", e.Dataset, declared, e.Files)
}

// ErrorKind is "data_version": the dataset, not the operation's input, is at fault, and only a
// build that reads and writes its version (or a rewrite of the table) gets past it. Callers
// that route errors by a kind string use it.
func (e *DataVersionError) ErrorKind() string { return "data_version" }

// ErrorDetail names the dataset and both versions for callers that report an error's fields.
func (e *DataVersionError) ErrorDetail() map[string]any {
	return map[string]any{"dataset": e.Dataset, "op": e.Op, "declared": e.Declared, "files": e.Files}
}

// declaredVersion is the data file version m declares. A manifest without data_format is a
// legacy (0.1) dataset, which this package neither reads nor writes.
func declaredVersion(m *Manifest) (file.Version, bool) {
	if m.DataFormat != "" && m.DataFormat != DataFormat {
		return file.Version{}, false
	}
	v, err := file.ParseVersion(m.DataVersion)
	if err != nil {
		return file.Version{}, false
	}
	return v, true
}

// FileVersion is the data file version the dataset declares, and whether it parses at all.
func (d *Dataset) FileVersion() (file.Version, bool) { return declaredVersion(d.manifest) }

// writeVersion is the version new data files of d must have; it refuses a dataset whose
// declared version this build cannot write.
func (d *Dataset) writeVersion() (file.Version, error) {
	v, ok := declaredVersion(d.manifest)
	if !ok || !file.Writable(v) {
		return file.Version{}, &DataVersionError{Dataset: d.dir.URI(), Op: "write", Declared: d.manifest.DataVersion, Files: file.Versions(file.Writable)}
	}
	return v, nil
}

// checkReadable refuses to decode a dataset whose declared version this build cannot read,
// before any data file is fetched.
func (d *Dataset) checkReadable() error {
	v, ok := declaredVersion(d.manifest)
	if !ok || !file.Readable(v) {
		return &DataVersionError{Dataset: d.dir.URI(), Op: "read", Declared: d.manifest.DataVersion, Files: file.Versions(file.Readable)}
	}
	return nil
}

// fileOptions pins fo to the dataset's declared version.
func (d *Dataset) fileOptions(fo file.Options) (file.Options, error) {
	v, err := d.writeVersion()
	if err != nil {
		return fo, err
	}
	if !fo.Version.IsZero() && fo.Version != v {
		return fo, &DataVersionError{Dataset: d.dir.URI(), Op: "commit", Declared: d.manifest.DataVersion, Files: fo.Version.String()}
	}
	fo.Version = v
	return fo, nil
}

// checkAddedFiles is the commit's last word on mixing: every data file a transaction adds must
// be of the declared version, whoever encoded it.
func checkAddedFiles(dataset string, m *Manifest, frags []Fragment) error {
	v, ok := declaredVersion(m)
	for i := range frags {
		for _, f := range frags[i].Files {
			if !ok || f.FileMajor != v.Major || f.FileMinor != v.Minor {
				return &DataVersionError{Dataset: dataset, Op: "commit", Declared: m.DataVersion,
					Files: file.Version{Major: f.FileMajor, Minor: f.FileMinor}.String()}
			}
		}
	}
	return nil
}
