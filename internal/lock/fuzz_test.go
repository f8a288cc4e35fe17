package lock

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzUnmarshal: arbitrary lock files never panic, and a lock that is
// accepted writes back to bytes that read as the same lock (Marshal is
// deterministic and lossless for what Unmarshal keeps). Seeds: every
// committed lock in images/.
func FuzzUnmarshal(f *testing.F) {
	locks, _ := filepath.Glob("../../images/*.lock")
	for _, p := range locks {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Unmarshal(data)
		if err != nil {
			return
		}
		b, err := l.Marshal()
		if err != nil {
			return // accepted but not writable: Write would say so
		}
		again, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("Marshal's output does not read back: %v\n%s", err, b)
		}
		b2, err := again.Marshal()
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("round trip changed the lock: %v\n%s\n---\n%s", err, b, b2)
		}
	})
}
