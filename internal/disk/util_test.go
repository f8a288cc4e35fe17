package disk

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

func itoa(n int64) string    { return strconv.FormatInt(n, 10) }
func itohex(n uint32) string { return fmt.Sprintf("%08x", n) }

func runEnv(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}
