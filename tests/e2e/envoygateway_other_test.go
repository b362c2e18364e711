//go:build !linux

package e2e

import (
	"context"
	"errors"

	"github.com/railgrid/railgrid-kcp/tests/internal/testenv"
)

type privateLaunch struct {
	name, bin, dir string
	certs, config  string
	apiServer      string
	inside         string
	env, args      []string
}

// launchInPrivateNamespaces needs Linux namespaces (Envoy Gateway's fixed /certs and
// ports); the e2e test runs on Linux only.
func launchInPrivateNamespaces(context.Context, privateLaunch) (*testenv.Process, func() int, error) {
	return nil, nil, errors.New("Envoy Gateway runs in Linux mount and network namespaces; this platform has none")
}
