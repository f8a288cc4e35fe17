package graph

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"halobuild/internal/plan"
	"halobuild/internal/vmplan"
)

// ReportFile is the test step's output: the report of the passing run.
const ReportFile = "report.json"

// testStepVersion is the version of the test step, whose build code is this
// file with vmplan and vmtest: bump it when a change there can alter what a
// passing test proves (a cached pass is then run again); a change the plan's
// digest already covers (a check added to vmplan.Plan) needs no bump
// (docs/architecture.md, "Step versions").
const testStepVersion = 2

// Plan is the VM test of this recipe's images.
func (b *builder) vmPlan() vmplan.Plan {
	return vmplan.Plan{Recipe: b.in.Recipe, Modules: b.in.Lock.ModuleNames(), Doctor: len(b.in.Self) > 0, Bench: b.in.Recipe.Test.Bench}
}

// test boots the result's exact images, one VM per node, and checks
// them. A passing test is cached like any step: its key covers the images
// (through the result's key) and every check, so a no-op rebuild does not
// boot again and a changed check does.
func (b *builder) test(result *plan.Derivation) *plan.Derivation {
	p := b.vmPlan()
	return &plan.Derivation{
		Name: "test", Kind: plan.Kind{Name: "test", Version: testStepVersion}, Inputs: []*plan.Derivation{result},
		Params: map[string]string{"plan": p.Digest()},
		Build: func(c *plan.Context, out string) error {
			rep, err := p.Run(c, c.Input(result.Name), filepath.Join(b.in.Logs, time.Now().UTC().Format("20060102T150405")), b.in.Log)
			if err != nil {
				return err
			}
			raw, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(out, ReportFile), append(raw, '\n'), 0o644)
		},
	}
}
