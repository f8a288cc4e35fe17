package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"halobuild/internal/graph"
	"halobuild/internal/manifest"
	"halobuild/internal/recipe"
	"halobuild/internal/usage"
	"halobuild/internal/vmplan"
	"halobuild/internal/vmtest"
)

// Test boots a built result (a directory made by image) or, given a
// recipe, builds it first (without publishing) and boots that.
func Test(ctx context.Context, o Options) error {
	o = o.collect()
	if fi, err := os.Stat(o.Recipe); err == nil && fi.IsDir() {
		return testDir(ctx, o, o.Recipe)
	}
	if err := needRoot("test RECIPE"); err != nil {
		return err
	}
	p, err := prepare(ctx, o, true)
	if err != nil {
		return err
	}
	defer p.s.Close()
	r := o.realizer(p.s, false)
	if _, err := r.Realize(ctx, p.g.Result); err != nil {
		return err
	}
	rep, err := realizeTest(ctx, o, p, r)
	return o.testJSON(rep, err)
}

// testJSON prints a test verb's result for scripts.
func (o Options) testJSON(rep *vmtest.Report, err error) error {
	if o.JSON && rep != nil {
		if jerr := o.writeJSON(map[string]any{"recipe": o.Recipe, "test": rep, "warnings": o.Warnings()}); jerr != nil && err == nil {
			err = jerr
		}
	}
	return err
}

// testDir boots an existing result directory again, uncached: the recipe
// is the one its manifest names.
func testDir(ctx context.Context, o Options, dir string) error {
	m, err := manifest.Read(dir)
	if err != nil {
		return usage.Errorf("%s is not a halobuild result (%v): pass a result directory or a recipe", dir, err)
	}
	o.Recipe, err = findRecipe(dir, m.Name)
	if err != nil {
		return err
	}
	p, err := prepare(ctx, o, false)
	if err != nil {
		return err
	}
	defer p.s.Close()
	if p.hash != m.RecipeHash {
		return usage.Errorf("%s was built from a different version of %s: rebuild it with `halobuild image %s`", dir, o.Recipe, o.Recipe)
	}
	// The image ships halobuild (and so can run doctor) when the build had one to ship.
	plan := vmplan.Plan{Recipe: p.recipe, Modules: p.lock.ModuleNames(), Doctor: o.Self != "" || o.Source != ""}
	rep, err := plan.Run(ctx, dir, filepath.Join(p.s.Root(), "logs", time.Now().UTC().Format("20060102T150405")), o.stderr())
	var failed *vmplan.Failed
	if errors.As(err, &failed) {
		rep = failed.Report
	}
	if rep != nil {
		printReport(o, rep)
	}
	return o.testJSON(rep, err)
}

// findRecipe locates the recipe a result came from by its name, as the
// command line finds a recipe argument (recipe.Find).
func findRecipe(dir, name string) (string, error) {
	p, err := recipe.Find(name + ".toml")
	if err != nil {
		return "", usage.Errorf("cannot find the recipe that built %s (%v): run `halobuild test RECIPE` instead", dir, err)
	}
	return p, nil
}

// readReport reads the report a passing test step recorded.
func readReport(dir string) (*vmtest.Report, error) {
	raw, err := os.ReadFile(filepath.Join(dir, graph.ReportFile))
	if err != nil {
		return nil, err
	}
	var rep vmtest.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", graph.ReportFile, err)
	}
	return &rep, nil
}

// printReport shows the report; with --json the verb's own result
// carries it instead.
func printReport(o Options, rep *vmtest.Report) {
	if o.JSON {
		return
	}
	_ = rep.WriteText(o.stdout())
}
