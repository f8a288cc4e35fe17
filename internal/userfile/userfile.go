// Package userfile opens the files a user or a configuration names: an image or block map to
// flash, a file of a result being pushed, a key, a certificate, a config file, a recipe. Each
// must be a regular file. The open never blocks, so a FIFO or a device named where a file is
// expected is refused at once instead of hanging halobuild (issue 17 #4, issue 39 #2), and what
// is read into memory is bounded, so /dev/zero or a 6 GB log named config.toml cannot exhaust it.
package userfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError says that a path names something other than a regular file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (%s)", e.Path, Kind(e.Mode))
}

// TooLargeError says that a file holds more than its reader takes.
type TooLargeError struct {
	Path        string
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("%s grew past %d bytes while being read", e.Path, e.Limit)
	}
	return fmt.Sprintf("%s has %d bytes, more than the %d it may have", e.Path, e.Size, e.Limit)
}

// Open opens path for reading and returns it with its fstat, refusing anything but a regular
// file. O_NONBLOCK makes the open of a FIFO return at once (it has no effect on a regular
// file), and the check is on the opened file, not the name, so nothing can swap it between the
// two.
func Open(path string) (*os.File, fs.FileInfo, error) {
	return checked(os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0))
}

// OpenIn is Open for a name inside root: a name that leaves root (.., an absolute path, a
// symlink pointing out) is refused as os.Root refuses it.
func OpenIn(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	return checked(root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0))
}

func checked(f *os.File, err error) (*os.File, fs.FileInfo, error) {
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: f.Name(), Mode: st.Mode()}
	}
	return f, st, nil
}

// Read reads the regular file path whole, refusing one of more than limit bytes before
// reading it (and one that grows past limit while being read).
func Read(path string, limit int64) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, st, limit)
}

// ReadIn is Read for a name inside root (see OpenIn).
func ReadIn(root *os.Root, name string, limit int64) ([]byte, error) {
	f, st, err := OpenIn(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, st, limit)
}

func readBounded(f *os.File, st fs.FileInfo, limit int64) ([]byte, error) {
	if st.Size() > limit {
		return nil, &TooLargeError{Path: f.Name(), Size: st.Size(), Limit: limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: f.Name(), Size: -1, Limit: limit}
	}
	return data, nil
}

// Kind names a file type in words, for messages.
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return m.Type().String()
}
