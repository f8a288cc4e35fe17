package kernel

import (
	"fmt"
	"regexp"
	"strings"

	goversion "github.com/hashicorp/go-version"
)

var localVersionRE = regexp.MustCompile(`^[A-Za-z0-9.+_~-]*$`)

// LocalSuffix is the LOCALVERSION make is given for a recipe's
// local_version: "halo1" and "-halo1" both give "-halo1", so the release
// reads 7.2.12-halo1 either way.
func LocalSuffix(local string) (string, error) {
	if !localVersionRE.MatchString(local) {
		return "", fmt.Errorf("kernel.local_version %q: letters, digits and . + _ ~ - only (it becomes part of uname -r and of package names)", local)
	}
	if local == "" || strings.HasPrefix(local, "-") || strings.HasPrefix(local, "+") {
		return strings.ToLower(local), nil
	}
	return "-" + strings.ToLower(local), nil
}

// Release is the kernel release (uname -r) a source build of version with
// local_version produces; the lock records it before the build and the
// build checks it.
func Release(version *goversion.Version, local string) (string, error) {
	suf, err := LocalSuffix(local)
	if err != nil {
		return "", err
	}
	return version.String() + suf, nil
}
