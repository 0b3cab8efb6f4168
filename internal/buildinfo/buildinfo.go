// Package buildinfo is what the worker binary knows of its own build: the module version, the
// commit and commit time it was built from, whether the work tree had changes, and the Go
// version. `worker version` prints it and omnigraph_build_info exports it.
//
// It comes from the build information the Go toolchain stamps into every binary
// (runtime/debug.ReadBuildInfo: the main module's version, and vcs.revision, vcs.time and
// vcs.modified when built inside a git work tree). A build without the repository's history
// (the container build, whose context leaves .git out) can set the same fields with
// -ldflags "-X github.com/omnigraph/omnigraph-worker/internal/buildinfo.version=… .commit=…
// .buildTime=…"; a field set so wins over the stamped one.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set with -ldflags -X by builds that have no VCS stamp (see the package doc); empty otherwise.
var (
	version   string
	commit    string
	buildTime string
)

// Unknown is the value of a field the build did not record.
const Unknown = "unknown"

// Info is one binary's build.
type Info struct {
	// Version is the main module's version: a tag (v1.2.3), a pseudo-version derived from the
	// commit (v0.0.0-20260101120000-abcdef123456, "+dirty" when the tree had changes), or
	// "(devel)" for a build the toolchain could not version.
	Version string
	// Commit is the full revision the binary was built from (vcs.revision).
	Commit string
	// Time is the build's time as the toolchain records it: the commit's time, RFC 3339
	// (vcs.time; a reproducible build has no wall-clock time of its own).
	Time string
	// Modified: the work tree had uncommitted changes (vcs.modified).
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read is this binary's build.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version, commit, buildTime)
}

// fromBuildInfo reads bi (nil: none recorded), then lets the -X values override.
func fromBuildInfo(bi *debug.BuildInfo, xVersion, xCommit, xTime string) Info {
	in := Info{Version: Unknown, Commit: Unknown, Time: Unknown, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.time":
				in.Time = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	for _, x := range []struct {
		v   string
		dst *string
	}{{xVersion, &in.Version}, {xCommit, &in.Commit}, {xTime, &in.Time}} {
		if x.v != "" {
			*x.dst = x.v
		}
	}
	return in
}

// ShortCommit is the first 12 hex digits of the commit (the whole value when shorter).
func (in Info) ShortCommit() string {
	if len(in.Commit) > 12 && in.Commit != Unknown {
		return in.Commit[:12]
	}
	return in.Commit
}

// String is what `worker version` prints: the version on the first line, then the commit
// ("(modified)" when the tree had changes), its time and the Go version.
func (in Info) String() string {
	c := in.Commit
	if in.Modified {
		c += " (modified)"
	}
	return fmt.Sprintf("omnigraph-worker %s\ncommit:     %s\nbuild time: %s\ngo:         %s", in.Version, c, in.Time, in.GoVersion)
}

// Labels are the label values of omnigraph_build_info, by label name.
func (in Info) Labels() map[string]string {
	return map[string]string{
		"version":    in.Version,
		"commit":     in.Commit,
		"build_time": in.Time,
		"modified":   fmt.Sprint(in.Modified),
		"go_version": strings.TrimSpace(in.GoVersion),
	}
}
