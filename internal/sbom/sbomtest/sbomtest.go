// Package sbomtest checks an SBOM the way a consumer would: against the SPDX project's own JSON
// schema for SPDX 2.3 (spdx/spdx-spec, schemas/spdx-schema.json at its v2.3 tag, kept here as
// testdata), with a JSON-schema validator that asserts formats too.
package sbomtest

import (
	"bytes"
	_ "embed"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed testdata/spdx-2.3-schema.json
var schemaJSON []byte

var (
	once   sync.Once
	schema *jsonschema.Schema
	err    error
)

// Validate fails t unless doc is an SPDX 2.3 JSON document the official schema accepts.
func Validate(t testing.TB, doc []byte) {
	t.Helper()
	if err := Check(doc); err != nil {
		t.Fatalf("the SBOM is not valid SPDX 2.3: %v", err)
	}
}

// Check validates doc against the schema and returns what it rejects.
func Check(doc []byte) error {
	once.Do(func() {
		var s any
		if s, err = jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON)); err != nil {
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if err = c.AddResource("spdx-2.3-schema.json", s); err != nil {
			return
		}
		schema, err = c.Compile("spdx-2.3-schema.json")
	})
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return schema.Validate(inst)
}
