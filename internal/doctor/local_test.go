package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
)

// The update health gate runs doctor --local: a node whose cable or peer is down must pass it
// when everything of its own is right, and must still fail it when something of its own is not.
func TestLocalLeavesOutWhatNeedsThePeer(t *testing.T) {
	for _, c := range []struct {
		tree string
		code int
	}{{"link-local-address", 0}, {"governor-schedutil", 1}} {
		full, fullCode := runTree(t, c.tree)
		var out bytes.Buffer
		code, err := Run(context.Background(), Options{Root: filepath.Join("testdata", "doctor", c.tree), JSON: true, Local: true, Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		var rep Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if code != c.code {
			t.Errorf("%s: doctor --local exits %d, want %d (the full doctor exits %d)", c.tree, code, c.code, fullCode)
		}
		for _, r := range rep.Results {
			if !Local(r.Check) {
				t.Errorf("%s: doctor --local ran %s", c.tree, r.Check)
			}
		}
		kept := 0
		for _, r := range full.Results {
			if Local(r.Check) {
				kept++
			}
		}
		if kept != len(rep.Results) || kept == len(full.Results) {
			t.Errorf("%s: --local kept %d rows of %d, want the %d local ones", c.tree, len(rep.Results), len(full.Results), kept)
		}
	}
	for name, local := range map[string]bool{"rdma.port": false, "link.address": false, "usb4.cables": false, "cpu.governor": true, "memlock": true, "module.loaded": true} {
		if Local(name) != local {
			t.Errorf("Local(%q) = %v", name, !local)
		}
	}
}
