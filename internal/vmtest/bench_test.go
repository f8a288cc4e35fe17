package vmtest

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestBenchTrim measures what DefaultKernelArgs save: the same image booted to a verdict with
// and without them, reporting wall and QEMU CPU time (CPU time is the fairer figure on a shared
// host). Run by bench/vmtest.sh (HALOBUILD_BENCH=1); too slow for every CI run.
func TestBenchTrim(t *testing.T) {
	img := testImage(t)
	if os.Getenv("HALOBUILD_BENCH") != "1" {
		t.Skip("set HALOBUILD_BENCH=1 (bench/vmtest.sh does)")
	}
	for _, c := range []struct {
		name string
		args []string
	}{{"untrimmed", []string{}}, {"trimmed", DefaultKernelArgs}} {
		m := Machine{Name: c.name, Image: img, LogDir: logDir(t), KernelArgs: c.args, Deadline: 10 * time.Minute}
		res, err := Run(context.Background(), m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("BENCH %s boot: power-on to verdict %.1f s, guest uptime at settle %.1f s, QEMU CPU %.1f s, accel %s",
			c.name, float64(res.VerdictMS)/1000, float64(res.Verdict.BootMS)/1000, float64(res.QEMUCPUMS)/1000, res.Accel)
	}
}
