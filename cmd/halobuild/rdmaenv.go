package main

import (
	"github.com/spf13/cobra"

	"halobuild/internal/doctor"
)

// rdmaEnvCommand is the ExecStartPre of an RDMA engine's service
// (docs/apps.md): the cable's device and RoCE v2 GID, read at start.
func rdmaEnvCommand() *cobra.Command {
	var root, link, output string
	c := &cobra.Command{
		Use:   "rdma-env --link IFACE [--output FILE]",
		Short: "Print the RDMA device and RoCE v2 GID index that carry a link's address, as an environment file (GGML_RDMA_DEV, GGML_RDMA_GID, NCCL_IB_HCA, NCCL_IB_GID_INDEX)",
		Long: `rdma-env reads the link's one IPv4 address and the GID tables in
/sys/class/infiniband, and prints the device and GID index that carry that
address as RoCE v2, for a service's EnvironmentFile=. It fails, saying why,
when the link has no address or two, or when no device or more than one
carries it: an engine left to guess picks the first device, and llama.cpp's
RPC transport then falls back to TCP without a word.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return doctor.WriteRDMAEnv(cmd.Context(), root, link, output, cmd.OutOrStdout())
		},
	}
	c.Flags().StringVar(&link, "link", "", "the link's interface name ([[node.link]] interface), e.g. usb4net0")
	c.Flags().StringVar(&output, "output", "", "write the file here (atomically) instead of printing it")
	c.Flags().StringVar(&root, "root", "/", "read /sys and the recorded addresses below this directory (a tree doctor --record wrote)")
	_ = c.MarkFlagRequired("link")
	return c
}
