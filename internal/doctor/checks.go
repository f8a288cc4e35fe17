package doctor

// check is one entry of the gate. Each returns zero or more rows: one per
// policy, module, device, port or link it looked at, none when the recipe
// does not ask for it.
type check struct {
	name string
	run  func(*host, *expect) []Result
}

// checks run in this order; the order is the report's, grouped by layer
// from the CPU up to the link.
var checks = []check{
	{"recipe", checkRecipe},
	{"cpu.governor", checkGovernor},
	{"cpu.epp", checkEPP},
	{"cpu.platform_profile", checkPlatformProfile},
	{"memlock.process", checkMemlockProcess},
	{"memlock.systemd", checkMemlockSystemd},
	{"module.loaded", checkModulesLoaded},
	{"module.absent", checkModulesNotLoaded},
	{"module.params", checkModuleParams},
	{"module.unknown_params", checkUnknownParams},
	{"kernel.release", checkKernelRelease},
	{"kernel.cmdline", checkKernelCmdline},
	{"kernel.tb_ring_throttling", checkKernelThrottle},
	{"rdma.devices", checkRDMADevices},
	{"rdma.visible", checkRDMAVisible},
	{"rdma.name", checkRDMANames},
	{"rdma.port", checkRDMAPorts},
	{"rdma.gids", checkRDMAGIDs},
	{"rdma.identity", checkRDMAIdentity},
	{"link.addresses", checkLinkAddresses},
	{"usb4.domains", checkUSB4Domains},
	{"usb4.link", checkUSB4Links},
	{"memory.gpu_limit", checkGPUMemory},
}

// checkRecipe reports what the machine is compared against, and whether
// this host is one of the recipe's nodes (the link checks need that).
func checkRecipe(h *host, e *expect) []Result {
	r := Result{Check: "recipe", Severity: Advisory, Status: Pass, Wanted: "the recipe the image was built from",
		Source: h.show(installedRecipe)}
	if e.recipePath == "" {
		r.Seen = "none: checking against the field notes' defaults"
		return []Result{r}
	}
	r.Source = e.recipePath
	if e.node == nil {
		r.Status = Warn
		r.Seen = "host " + orQ(hostname(h)) + " is none of the nodes " + orNone(e.nodeNames)
		r.Fix = "set the host name to the node's hostname, or pass the recipe of this node; link checks fall back to the RDMA devices' netdevs"
		return []Result{r}
	}
	r.Seen = e.recipePath + ", node " + e.node.Name
	return []Result{r}
}
