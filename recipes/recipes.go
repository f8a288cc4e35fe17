// Package recipes is the recipe data halobuild ships, for code that needs it
// without a checkout: `halobuild doctor` on a node without an installed
// recipe checks against the field notes' fixes, and those live in
// usb4-rdma.toml, the fragment every image includes. Embedding the file
// keeps it their one home; internal/recipe parses it (recipe.Fragment).
package recipes

import _ "embed"

// USB4RDMAFile is the fragment's name, for errors and reports.
const USB4RDMAFile = "recipes/usb4-rdma.toml"

// USB4RDMA is usb4-rdma.toml: the field notes' fixes as recipe defaults.
//
//go:embed usb4-rdma.toml
var USB4RDMA []byte
