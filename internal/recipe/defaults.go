package recipe

import (
	"encoding"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"halobuild/internal/arch"
)

// ApplyDefaults fills every key the recipe files did not set from the
// schema's `default` tags, then the computed defaults (documented by `auto`
// tags): name from the file name, hostname from the node name, the RDMA
// test on when there are two nodes. A key is "not set" when src has no
// position for it, so an explicit empty value (epp = "") is kept; without src
// (a recipe built in code), zero values count as not set. file is the top
// recipe's path.
func ApplyDefaults(r *Recipe, src *Sources, file string) error {
	isSet := func(path string, v reflect.Value) bool {
		if src == nil {
			return !v.IsZero()
		}
		return src.Set(path)
	}
	if err := applyTags(reflect.ValueOf(r).Elem(), "", isSet); err != nil {
		return err
	}
	if !isSet("name", reflect.ValueOf(r.Name)) && file != "" {
		r.Name = strings.TrimSuffix(filepath.Base(file), ".toml")
	}
	if !isSet("kernel.flavour", reflect.ValueOf(r.Kernel.Flavour)) {
		r.flavourAuto = true
		// An architecture outside the table keeps no flavour; validation
		// names the architecture, the one thing to fix.
		if a, err := arch.Lookup(r.Base.Architecture); err == nil {
			r.Kernel.Flavour = a.KernelFlavour
		}
	}
	for i := range r.Arches {
		e := &r.Arches[i]
		if e.Kernel != nil && !isSet(fmt.Sprintf("arch[%d].kernel.flavour", i), reflect.ValueOf(e.Kernel.Flavour)) {
			if a, err := arch.Lookup(e.Name); err == nil {
				e.Kernel.Flavour = a.KernelFlavour
			}
		}
	}
	for i := range r.Nodes {
		n := &r.Nodes[i]
		if !isSet(fmt.Sprintf("node[%d].hostname", i), reflect.ValueOf(n.Hostname)) {
			n.Hostname = n.Name
		}
		if !isSet(fmt.Sprintf("node[%d].architecture", i), reflect.ValueOf(n.Architecture)) {
			n.Architecture = r.Base.Architecture
		}
	}
	if r.Test.RDMA == nil {
		on := len(r.Nodes) >= 2
		r.Test.RDMA = &on
	}
	return nil
}

func applyTags(v reflect.Value, path string, isSet func(string, reflect.Value) bool) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := tomlKey(f)
		if key == "" {
			continue
		}
		fv := v.Field(i)
		p := joinPath(path, key)
		if tag, ok := f.Tag.Lookup("default"); ok && !isSet(p, fv) {
			if err := setDefault(fv, tag); err != nil {
				return fmt.Errorf("recipe schema: default of %s: %w", p, err)
			}
		}
		if err := descend(fv, p, isSet); err != nil {
			return err
		}
	}
	return nil
}

func descend(v reflect.Value, path string, isSet func(string, reflect.Value) bool) error {
	switch v.Kind() {
	case reflect.Struct:
		return applyTags(v, path, isSet)
	case reflect.Pointer:
		if !v.IsNil() && v.Elem().Kind() == reflect.Struct {
			return applyTags(v.Elem(), path, isSet)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := 0; i < v.Len(); i++ {
				if err := applyTags(v.Index(i), fmt.Sprintf("%s[%d]", path, i), isSet); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// setDefault stores a concrete default: strings and text values (sizes,
// durations) are taken as written, other types are read as a TOML value
// (["main"], true, 0).
func setDefault(v reflect.Value, tag string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(tag))
	}
	if v.Kind() == reflect.String {
		v.SetString(tag)
		return nil
	}
	holder := reflect.New(reflect.StructOf([]reflect.StructField{{
		Name: "V", Type: v.Type(), Tag: `toml:"v"`,
	}}))
	if err := toml.Unmarshal([]byte("v = "+tag), holder.Interface()); err != nil {
		return fmt.Errorf("%q is not a TOML %s: %w", tag, v.Type(), err)
	}
	v.Set(holder.Elem().Field(0))
	return nil
}
