//go:build linux

// Package e2e runs the kind stack end to end under the real Pulumi engine, the
// Kubernetes provider and the Go language host, on a cluster of its own with one real
// node, offline. What it proves, what it needs and how to hold the converged stack for
// hands-on use: docs/testing.md ("End to end" and "Hands on a running stack").
//
// The story is TestKindStackEndToEnd (e2e_test.go), a stage per file, in the order the
// file names give: 1_cluster, 2_first_up, 3_verify, 4_day_two, 5_faults, 6_restore,
// 7_destroy, 8_killed_up, on two machines side by side (killed-up and day two on the
// second). Each stage runs alone (go test -run 'TestKindStackEndToEnd/<machine>/<stage>'):
// it brings the stack to what it needs first.
// A stage file lists its steps at its top and holds their bodies; every other file holds
// what the steps share (the cluster, the node, the stack under the CLI, the engine's
// events, the offline plan, credentials, kcp clients, ...).
package e2e
