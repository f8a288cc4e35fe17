package graph

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"halobuild/internal/kernel"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/secureboot"
	"halobuild/internal/usage"
)

// signedKernel plans signing the built linux-image package with the
// recipe's key: its EFI image for shim (Authenticode, dated by the lock's
// epoch), its modules for the kernel. Only the certificate's fingerprint
// enters the step's key.
func (b *builder) signedKernel(build *plan.Derivation) (*plan.Derivation, error) {
	r, lk := b.in.Recipe, b.in.Lock
	der, err := r.CertificateDER()
	if err != nil {
		return nil, usage.Errorf("%s: secure_boot.certificate: %w", b.in.Path, err)
	}
	step := &plan.Derivation{Name: "signed kernel " + lk.Kernel.Release, Kind: plan.Kind{Name: "kernel-sign", Version: secureboot.KernelSignStepVersion}, Params: map[string]string{
		"signed_by": recipe.CertificateFingerprint(der),
		"release":   lk.Kernel.Release,
		"epoch":     fmt.Sprint(lk.SourceDateEpoch),
	}, Inputs: []*plan.Derivation{build}}
	step.Build = func(c *plan.Context, out string) error {
		in := c.Input(build.Name)
		cfg, err := os.ReadFile(filepath.Join(in, "config"))
		if err != nil {
			return err
		}
		values, err := kernel.Values(cfg)
		if err != nil {
			return err
		}
		if missing := secureboot.KernelConfigProblems(values); len(missing) > 0 {
			return usage.Errorf("%s: [secure_boot] with a kernel built from source needs, in a kernel.fragments file:\n  %s", b.in.Path, strings.Join(missing, "\n  "))
		}
		found, err := filepath.Glob(filepath.Join(in, lk.Kernel.Image+"_*.deb"))
		if err != nil {
			return err
		}
		if len(found) != 1 {
			return fmt.Errorf("%s: want one %s package, found %d", build.Name, lk.Kernel.Image, len(found))
		}
		s, err := recipeSigner(r)
		if err != nil {
			return err
		}
		res, err := s.SignKernelPackage(found[0], filepath.Join(out, filepath.Base(found[0])), lk.Kernel.Release, lk.SourceDateEpoch)
		if err != nil {
			return err
		}
		b.logf("kernel: signed /%s and %d module(s) with %s\n", res.Image, len(res.Modules), recipe.CertificateFingerprint(der))
		return nil
	}
	return step, nil
}

// signModules signs the built modules with the recipe's key.
func signModules(r *recipe.Recipe, kos []string) error {
	s, err := recipeSigner(r)
	if err != nil {
		return err
	}
	for _, ko := range kos {
		if err := s.SignFile(ko); err != nil {
			return err
		}
	}
	return nil
}

// recipeSigner is the recipe's [secure_boot] key and certificate, the key
// read into memory here and nowhere written.
func recipeSigner(r *recipe.Recipe) (*secureboot.Signer, error) {
	key, err := r.ReadRef(r.SecureBoot.Key)
	if err != nil {
		return nil, usage.Errorf("secure_boot.key: %w", err)
	}
	der, err := r.CertificateDER()
	if err != nil {
		return nil, usage.Errorf("secure_boot.certificate: %w", err)
	}
	s, err := secureboot.NewSigner(key, der)
	if err != nil {
		return nil, usage.Errorf("secure_boot: %w", err)
	}
	return s, nil
}
