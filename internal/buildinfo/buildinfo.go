// Package buildinfo reports which oml build is running: the version, the
// commit it was built from, the Go toolchain and when it was built.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set by the linker (-X) where the build knows better than the binary's
// own build information: Version for release builds; Commit and BuildTime
// by `make build` (Go records the commit only when it can run git on the
// checkout, and never records a build time).
var (
	Version   = ""
	Commit    = ""
	BuildTime = ""
)

// Info is what `oml version` prints.
type Info struct {
	Version    string `json:"version"`     // release version, else dev-COMMIT, else dev
	Module     string `json:"module"`      // module path
	ModVersion string `json:"mod_version"` // module version ("(devel)" for a checkout build)
	Commit     string `json:"commit"`      // full VCS revision ("" when unknown)
	Modified   bool   `json:"modified"`    // built from a tree with uncommitted changes
	CommitTime string `json:"commit_time"` // RFC3339, "" when unknown
	BuildTime  string `json:"build_time"`  // RFC3339, "" when unknown
	GoVersion  string `json:"go_version"`
	Platform   string `json:"platform"` // GOOS/GOARCH
}

// Read gathers Info from the linker variables and debug.ReadBuildInfo.
func Read() Info {
	in := Info{Commit: Commit, BuildTime: BuildTime, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		in.Module, in.ModVersion = bi.Main.Path, bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.modified":
				in.Modified = s.Value == "true"
			case "vcs.time":
				in.CommitTime = s.Value
			}
		}
	}
	in.Version = version(in)
	return in
}

func version(in Info) string {
	switch {
	case Version != "":
		return Version
	case in.Commit != "":
		rev := in.Commit
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if in.Modified {
			rev += "-dirty"
		}
		return "dev-" + rev
	case in.ModVersion != "" && in.ModVersion != "(devel)":
		return in.ModVersion
	}
	return "dev"
}

// String returns the human-readable version: the release version, or the
// VCS revision the binary was built from, or "dev".
func String() string { return Read().Version }
