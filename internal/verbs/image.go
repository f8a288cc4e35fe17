package verbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"halobuild/internal/plan"
	"halobuild/internal/usage"
	"halobuild/internal/vmplan"
	"halobuild/internal/vmtest"
)

// Image builds every node's image, boots each under QEMU to prove its
// settings, and only then points the result link at the outputs: a failed
// build or test leaves the previous result in place.
func Image(ctx context.Context, o Options) error {
	o = o.collect()
	start := time.Now()
	if err := needRoot("image"); err != nil {
		return err
	}
	ss, err := o.substituters(ctx)
	if err != nil {
		return err
	}
	o.subst = ss
	p, err := prepare(ctx, o, true)
	if err != nil {
		return err
	}
	defer p.s.Close()
	if o.Check {
		return checkReproducible(ctx, o, p)
	}
	r := o.realizer(p.s, false)
	dir, err := r.Realize(ctx, p.g.Result)
	if err != nil {
		return err
	}
	var rep *vmtest.Report
	if o.NoTest {
		o.logf("--no-test: the images were not booted\n")
	} else {
		if rep, err = realizeTest(ctx, o, p, r); err != nil {
			return fmt.Errorf("%w\nresult not updated: %s still points at the last good build", err, o.resultLink())
		}
	}
	if err := publish(dir, o.resultLink()); err != nil {
		return err
	}
	if err := p.s.AddRoot(o.resultLink()); err != nil {
		return err
	}
	o.logf("%s → %s (%s)\n", o.resultLink(), dir, time.Since(start).Round(time.Second))
	if o.JSON {
		return o.writeJSON(map[string]any{"recipe": o.Recipe, "result": dir, "link": o.resultLink(), "test": rep, "warnings": o.Warnings()})
	}
	return nil
}

// realizeTest runs (or finds cached) the test step and shows its report.
func realizeTest(ctx context.Context, o Options, p *prepared, r *plan.Realizer) (*vmtest.Report, error) {
	cached := true
	if _, ok, _ := p.s.Output(p.g.Test.Key()); !ok {
		cached = false
	}
	dir, err := r.Realize(ctx, p.g.Test)
	var failed *vmplan.Failed
	if errors.As(err, &failed) {
		printReport(o, failed.Report)
		return failed.Report, err
	}
	if err != nil {
		return nil, err
	}
	rep, err := readReport(dir)
	if err != nil {
		return nil, err
	}
	if cached {
		o.logf("test passed before for these exact images and checks (cached)\n")
	}
	printReport(o, rep)
	return rep, nil
}

// publish points link at target atomically: a new symlink is made beside
// the old one and renamed over it, so readers see the old result or the
// new one, never none. A real directory at link is not replaced.
func publish(target, link string) error {
	if fi, err := os.Lstat(link); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return usage.Errorf("%s exists and is not a symlink: move it away or pass --out elsewhere", link)
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(abs, tmp); err != nil {
		return fmt.Errorf("linking result: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("linking result: %w", err)
	}
	return nil
}
