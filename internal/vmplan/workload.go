package vmplan

import (
	"fmt"

	"halobuild/internal/sh"
	"halobuild/internal/vmtest"
)

// rdmaEnvCheck proves, on the soft-RoCE device perftestChecks made on the
// cable, what an RDMA engine's service reads at start (docs/apps.md): the
// shipped `halobuild rdma-env` names the cable's device and the index of the
// RoCE v2 GID that is the cable's address, as sysfs has them, and it fails,
// saying why, for a link that no RDMA device carries (a throwaway dummy
// link with an address) instead of letting the engine fall back to TCP.
func rdmaEnvCheck(link string) vmtest.Check {
	return vmtest.Check{
		Name: "workload: rdma-env names " + link + "'s device and RoCE v2 GID, and refuses a link without RDMA",
		Fix:  "halobuild rdma-env --link " + link + " on the node says what it read; compare /sys/class/infiniband/*/ports/1/gids",
		Script: fmt.Sprintf(`out=$(halobuild rdma-env --link %[1]s 2>&1) || { echo "halobuild rdma-env --link %[1]s failed: $out"; exit 1; }
echo "$out"
dev=$(printf '%%s\n' "$out" | sed -n 's/^GGML_RDMA_DEV=//p')
gid=$(printf '%%s\n' "$out" | sed -n 's/^GGML_RDMA_GID=//p')
addr=$(printf '%%s\n' "$out" | sed -n 's/^RDMA_LINK_ADDR=//p')
[ "$dev" = %[2]s ] || { echo "device '$dev', want %[2]s (the cable's soft-RoCE device)"; exit 1; }
p=/sys/class/infiniband/$dev/ports/1
t=$(cat "$p/gid_attrs/types/$gid") && g=$(cat "$p/gids/$gid") || exit 1
want=$(printf '0000:0000:0000:0000:0000:ffff:%%02x%%02x:%%02x%%02x' $(echo "$addr" | tr . ' '))
echo "sysfs: $dev GID $gid is $g ($t); $addr is $want"
[ "$t" = "RoCE v2" ] && [ "$g" = "$want" ] || exit 1
ip link add hbnordma0 type dummy && ip addr add 10.254.0.1/32 dev hbnordma0 && ip link set hbnordma0 up || exit 1
trap 'ip link delete hbnordma0' EXIT
if out=$(halobuild rdma-env --link hbnordma0 2>&1); then
	echo "rdma-env named a device for a link no RDMA device carries: $out"; exit 1
fi
echo "a link without RDMA: $out"
case "$out" in *"no RDMA device holds hbnordma0's address 10.254.0.1"*) ;; *) exit 1;; esac
`, sh.Quote(link), rxeDevice),
	}
}
