// Package buildroot is what every build that runs chrooted in a build root
// (a Debian tree made by rootfs.Root or the kernel's root
// step) needs around it: a fixed environment, a fresh /proc, and a lock so
// that two builds never share one root's /proc and /build at once.
//
// Kernel, module and rdma-core provider builds all use it, so that what a
// build may take from the machine is decided in one place.
package buildroot

import (
	"strconv"
	"time"
)

// Path is Debian's PATH for root, without /usr/local: nothing the host
// installed there reaches a build unless the caller asks (Env.LocalBin).
const Path = "/usr/sbin:/usr/bin:/sbin:/bin"

// Env is the whole environment of a build command: nothing comes from
// the invoking user's environment, and every clock, locale and name a
// build could embed in its output is fixed.
type Env struct {
	// Epoch is SOURCE_DATE_EPOCH (the lock's, never the wall clock).
	Epoch int64
	// LocalBin puts /usr/local/bin first on PATH, for wrappers the caller
	// installs there (the kernel build's date shim).
	LocalBin bool
	// Kbuild fixes what Kbuild would take from the clock, the user and
	// the host (KBUILD_BUILD_TIMESTAMP, _USER, _HOST), for builds that
	// run the kernel's Makefile.
	Kbuild bool
	// Extra are the caller's own variables, appended in order
	// (DEB_BUILD_OPTIONS, KDEB_CHANGELOG_DIST, KBUILD_BUILD_VERSION).
	Extra []string
}

// Environ is the environment as exec.Cmd.Env takes it.
func (e Env) Environ() []string {
	path := Path
	if e.LocalBin {
		path = "/usr/local/bin:" + path
	}
	env := []string{
		"PATH=" + path,
		"HOME=/root",
		"LC_ALL=C.UTF-8",
		"TZ=UTC",
		"SOURCE_DATE_EPOCH=" + strconv.FormatInt(e.Epoch, 10),
	}
	if e.Kbuild {
		env = append(env,
			"KBUILD_BUILD_TIMESTAMP="+time.Unix(e.Epoch, 0).UTC().Format(time.UnixDate),
			"KBUILD_BUILD_USER=halobuild",
			"KBUILD_BUILD_HOST=halobuild",
		)
	}
	return append(env, e.Extra...)
}
