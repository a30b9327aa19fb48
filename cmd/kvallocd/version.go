//go:build linux

package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/kvalloc/kvalloc/wire"
)

// versionText is what -version prints: the module's path and version as
// the Go toolchain recorded them in the binary (the tag or pseudo-version
// under go install module@version; under go build in a checkout the
// version Go derived from its tags and revision, or "(devel)"), the
// checkout's revision when Go stamped it (a clone, not a git worktree, whose
// .git is a file Go does not read), the toolchain, and the protocol version the daemon
// speaks.
func versionText() string {
	return formatVersion(debug.ReadBuildInfo())
}

// formatVersion is versionText of the build information info (ok false:
// none).
func formatVersion(info *debug.BuildInfo, ok bool) string {
	var b strings.Builder
	mod, ver := "github.com/kvalloc/kvalloc", "(unknown: no build information)"
	if ok {
		if info.Main.Path != "" {
			mod = info.Main.Path
		}
		if info.Main.Version != "" {
			ver = info.Main.Version
		}
	}
	fmt.Fprintf(&b, "kvallocd %s\n", ver)
	fmt.Fprintf(&b, "module   %s %s", mod, ver)
	if ok && info.Main.Sum != "" {
		fmt.Fprintf(&b, " %s", info.Main.Sum)
	}
	b.WriteString("\n")
	if ok {
		s := map[string]string{}
		for _, kv := range info.Settings {
			s[kv.Key] = kv.Value
		}
		if rev := s["vcs.revision"]; rev != "" {
			fmt.Fprintf(&b, "vcs      %s %s", s["vcs"], rev)
			if t := s["vcs.time"]; t != "" {
				fmt.Fprintf(&b, " %s", t)
			}
			if s["vcs.modified"] == "true" {
				b.WriteString(" (modified)")
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "go       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "protocol %d to %d (magic %q; wire/PROTOCOL.md)\n", wire.Version, wire.MaxVersion, wire.Magic)
	return b.String()
}
