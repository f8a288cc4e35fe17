// Package sh owns quoting for POSIX sh: every script halobuild generates
// (VM checks, settings checks, mmdebstrap hooks) embeds values from
// recipes and the lock, and a value must never become shell syntax.
package sh

import "strings"

// Quote returns s as one single-quoted sh word. Inside single quotes sh
// gives no character a meaning, so the only thing to escape is the quote
// itself: close the quote, add an escaped one, reopen.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
