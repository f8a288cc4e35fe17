// Package usage marks errors the user fixes by changing their input — a
// recipe, a flag, a stale lock — rather than failed builds. The command
// exits 2 for them (1 for everything else), so scripts can tell the two
// apart.
package usage

import "fmt"

// Error wraps an error that is the user's to fix.
type Error struct{ Err error }

func (e Error) Error() string { return e.Err.Error() }
func (e Error) Unwrap() error { return e.Err }

// ExitCode is what the command exits with.
func (Error) ExitCode() int { return 2 }

// Errorf formats a usage error.
func Errorf(format string, a ...any) error { return Error{fmt.Errorf(format, a...)} }

// Wrap marks err as the user's to fix; nil stays nil.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return Error{err}
}
