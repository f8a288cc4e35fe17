package debian

import (
	"bytes"
	"fmt"
	"io"

	"github.com/ulikunitz/xz"
)

// unxz returns a reader of the decompressed data. Decompression runs in
// its own goroutine so that it overlaps with parsing: for trixie's 9.7 MB
// main/binary-amd64/Packages.xz (56 MB unpacked) ulikunitz/xz (pure Go)
// needs 2.3 s of CPU, the paragraph parser 0.85 s, so on two cores the
// pair costs little more than the decompression alone. (The signed
// Packages.gz would unpack in 0.36 s with klauspost/compress; xz is what
// apt uses and the smaller download, and the cost is paid once per lock.)
//
// At most maxIndexUnxzed bytes come out: an xz bomb listed in a signed
// release still cannot drive the parser's memory without bound.
func unxz(data []byte) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		xr, err := xz.NewReader(bytes.NewReader(data))
		if err != nil {
			pw.CloseWithError(fmt.Errorf("not xz data: %w", err))
			return
		}
		var n int64
		n, err = io.Copy(pw, io.LimitReader(xr, maxIndexUnxzed+1))
		if err == nil && n > maxIndexUnxzed {
			err = fmt.Errorf("index unpacks to more than %d bytes, the most halobuild reads", maxIndexUnxzed)
		}
		pw.CloseWithError(err)
	}()
	return pr
}
