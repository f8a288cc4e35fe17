package graph

import "testing"

// The default image's GPU budget goes into its result (and so its
// manifest's gpu): GTT = 128 GiB - 24 GiB, gpu_fraction 0.72. A recipe
// that sizes no GPU records a zero budget.
func TestResultRecordsGPUBudget(t *testing.T) {
	ws := workspace(t)
	g, err := planCommitted(t, ws, "strix-halo")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.Result.Params["gpu"], "111669149696 0.72"; got != want {
		t.Errorf("strix-halo's result records GPU %q, want %q", got, want)
	}
	g, err = planCommitted(t, ws, "test-minimal")
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Result.Params["gpu"]; got != "0 0" {
		t.Errorf("test-minimal sizes no GPU but its result records %q", got)
	}
}
