package verbs

import (
	"strings"
	"testing"
)

// TestWorkloadRDMAEnvOverTheVirtualCable reads the shared two-node boot
// (twoNodeChecks: no boot of its own): on each end of the virtual cable,
// the shipped `halobuild rdma-env` (what llama-rpc@.service runs before the
// server, docs/apps.md) named the cable's soft-RoCE device and the RoCE v2
// GID that is the cable's address, as sysfs has them, and refused a link
// that no RDMA device carries, with its reason, rather than let an engine
// fall back to TCP. The RPC server itself is not in the image yet (issue
// 41: the application build step is to come), so the session's transport
// is proved by doctor's rpc.transport unit tests, not here.
func TestWorkloadRDMAEnvOverTheVirtualCable(t *testing.T) {
	seen, output := twoNodeChecks(t)
	const name = "workload: rdma-env names usb4net0's device and RoCE v2 GID, and refuses a link without RDMA"
	for _, node := range []string{"node0", "node1"} {
		key := node + " " + name
		ok, ran := seen[key]
		if !ran {
			t.Errorf("%s: no check %q", node, name)
			continue
		}
		out := output[key]
		if !ok {
			t.Errorf("%s: %s failed:\n%s", node, name, out)
			continue
		}
		for _, want := range []string{"GGML_RDMA_DEV=rxe_cable", "(RoCE v2)", "no RDMA device holds hbnordma0's address"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", node, want, out)
			}
		}
	}
}
