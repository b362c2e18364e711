// Package conformance applies every Kubernetes object of the kind and gke stacks'
// offline plans to a real kube-apiserver (with etcd, on loopback, started by the test)
// that has the upstream CRDs installed, with server-side apply and strict field
// validation. It catches what schema-free unit tests cannot: unknown or misspelled
// fields, CEL rules of the CRDs, ClusterIPs outside the Service range or already taken,
// namespaces that do not exist yet, and patches of objects the cluster already has.
//
// The test needs kube-apiserver and etcd: from the KUBE_APISERVER and ETCD environment
// variables, or on PATH. hack/conformance.sh builds them and runs the test. Without the
// binaries the test fails, unless RAILGRID_SKIP_CONFORMANCE=1; `go test -short` skips it.
// The CRDs are read from ../shared/reference/crds/ relative to the repository root, or
// from RAILGRID_CRDS_DIR. The servers, their certificates and processes, and the CRD
// loading come from internal/testkit/testenv, which the e2e test shares.
package conformance
