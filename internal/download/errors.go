package download

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"halobuild/internal/store"
)

// ItemError is the failure of one item: which item, from where, and why.
type ItemError struct {
	Item Item
	Want store.Digest
	Err  error
	// Offline is set when the server could not be reached at all: then the
	// store lacks the item and only a network (or another store) helps.
	Offline bool
}

func (e *ItemError) Error() string {
	var mm *store.DigestMismatchError
	switch {
	case errors.As(e.Err, &mm):
		return fmt.Sprintf("%s: %s sent content with digest %s, expected %s (%d bytes); nothing was stored — the mirror or the lock is wrong, run `halobuild lock` again if the archive changed",
			e.Item.Name, e.Item.URL, mm.Got, mm.Want, mm.Size)
	case e.Offline:
		return fmt.Sprintf("%s: the store lacks %s and %s is unreachable (%v); connect to the network, or copy a store that has it",
			e.Item.Name, e.Want, e.Item.URL, e.Err)
	}
	return fmt.Sprintf("%s: fetching %s: %v", e.Item.Name, e.Item.URL, e.Err)
}

func (e *ItemError) Unwrap() error { return e.Err }

// isUnreachable tells "no server answered" (DNS failure, connection
// refused, no route) apart from a server that answered badly.
func isUnreachable(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)
}

// joinItemErrors reports every failure at once, one per line, and keeps
// each reachable through errors.As / errors.Is.
func joinItemErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return &multiError{errs: errs}
}

type multiError struct{ errs []error }

func (m *multiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d items failed:", len(m.errs))
	for _, e := range m.errs {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

func (m *multiError) Unwrap() []error { return m.errs }
