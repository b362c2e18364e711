// Command pulumi-resource-kubernetes serves the Pulumi Kubernetes provider
// (package provider of github.com/pulumi/pulumi-kubernetes/provider/v4) for
// local tests.
//
// The provider's own command embeds a schema produced by its release build,
// so this one embeds the schema.json and terraform-mapping.json that the
// provider module ships. hack/build-tools.sh copies this module and those two
// files from the module cache into a scratch directory and builds there; the
// JSON files are never committed.
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
)

// version is the provider version reported to the Pulumi engine. It must be a
// semantic version; hack/build-tools.sh sets it with -ldflags -X main.version.
var version = "4.32.0"

//go:embed schema.json
var schema []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

func main() {
	versioned, err := schemaWithVersion(schema, version)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-resource-kubernetes: %v\n", err)
		os.Exit(1)
	}
	provider.Serve("kubernetes", version, versioned, terraformMapping)
}

// schemaWithVersion returns the package schema with its top-level "version"
// field set, as the provider's release build does before embedding it.
func schemaWithVersion(schema []byte, version string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(schema, &fields); err != nil {
		return nil, fmt.Errorf("parse embedded schema: %w", err)
	}
	v, err := json.Marshal(version)
	if err != nil {
		return nil, err
	}
	fields["version"] = v
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	return out, nil
}
