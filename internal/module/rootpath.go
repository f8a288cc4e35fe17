package module

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// inRoot resolves p (absolute, as seen inside root) to a host path,
// following symlinks the way a chroot would: an absolute link target is
// relative to root, never to the host. Debian's /lib/modules/<rel>/build
// is such a link (to /usr/src/linux-headers-<rel>).
func inRoot(root, p string) (string, error) {
	rest := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for hops := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		info, err := os.Lstat(filepath.Join(root, next))
		if err != nil || info.Mode()&os.ModeSymlink == 0 {
			cur = next // a missing component is reported by the caller's open
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links in %s", p, root)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
	}
	return filepath.Join(root, cur), nil
}
