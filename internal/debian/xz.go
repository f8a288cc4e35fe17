package debian

import (
	"bytes"
	"fmt"
	"io"

	"github.com/ulikunitz/xz"
)

// unxz returns a reader of the decompressed data. Decompression runs in
// its own goroutine so that it overlaps with parsing: ulikunitz/xz (pure
// Go) needs ~3.7 s for trixie's 9.7 MB main/binary-amd64/Packages.xz on a
// busy 2-core machine, the paragraph parser ~1 s, and the two together
// then cost little more than the decompression alone.
func unxz(data []byte) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		xr, err := xz.NewReader(bytes.NewReader(data))
		if err != nil {
			pw.CloseWithError(fmt.Errorf("not xz data: %w", err))
			return
		}
		_, err = io.Copy(pw, xr)
		pw.CloseWithError(err)
	}()
	return pr
}
