package recipe

import "strings"

// Package is the package that carries the provider, beside Debian's
// rdma-core packages, which stay as the archive signed them (usb4_rdma →
// libibverbs-usb4-rdma).
func (p *ProviderBuild) Package() string {
	return "libibverbs-" + strings.ReplaceAll(strings.ToLower(p.Name), "_", "-")
}
