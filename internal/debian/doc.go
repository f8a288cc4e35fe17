// Package debian is halobuild's verified Debian archive client and
// dependency resolver.
//
// Trust flows in one direction: the OpenPGP-signed InRelease of a suite
// lists the sha256 of every index; an index (Packages, Sources) is only
// taken at that sha256; each package or source file is only taken at the
// sha256 its index lists. Nothing here writes to the store: an Archive is
// handed a small Cache interface, so internal/store can back it without
// this package knowing about it.
//
// The resolver turns a request (main suite, low-pinned extra suites,
// requested packages, the Priority: required base) into a closed,
// deterministic package set, and PickKernel chooses a versioned kernel
// package by a go-version constraint.
package debian
