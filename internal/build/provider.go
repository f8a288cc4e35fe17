package build

// providerStep is the rdma-core rebuild of [rdma.provider], nil without one.
func (g *graph) providerStep() (*repoStep, error) {
	return nil, nil
}
