package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/config"
)

// The hub's namespace, Secret and kubeconfig (validate_hub.go): each refusal below is
// refused naming its rule, key and value, and each acceptance, at the edge of a rule,
// is taken.
func TestHubRefusals(t *testing.T) { requireRefused(t, hubRefusals) }

func TestHubAcceptances(t *testing.T) { requireAccepted(t, hubAcceptances) }

var hubRefusals = []refusal{
	{name: "hub namespace kube-system", rule: "hub-namespace", stack: "kind",
		edit: set("hub.namespace", "kube-system"),
		key:  "hub.namespace", value: "kube-system",
		says: "kube-*"},
	{name: "hub namespace default", rule: "hub-namespace", stack: "gke",
		edit: set("hub.namespace", "default"),
		key:  "hub.namespace", value: "default",
		says: "other than default"},
	{name: "hub namespace with a dot", rule: "hub-namespace", stack: "kind",
		edit: set("hub.namespace", "railgrid.system"),
		key:  "hub.namespace", value: "railgrid.system",
		says: "RFC 1123 label"},
	{name: "hub namespace of 64 characters", rule: "hub-namespace", stack: "kind",
		edit: set("hub.namespace", strings.Repeat("n", 64)),
		key:  "hub.namespace", value: strings.Repeat("n", 64),
		says: "must be no more than 63 characters"},
	{name: "hub secret name", rule: "hub-secret-name", stack: "kind",
		edit: set("hub.secretName", ""),
		key:  "hub.secretName", value: "",
		says: "Secret name"},
	{name: "hub secret name with an underscore", rule: "hub-secret-name", stack: "gke",
		edit: set("hub.secretName", "railgrid_kcp"),
		key:  "hub.secretName", value: "railgrid_kcp",
		says: "RFC 1123 subdomain"},
	{name: "hub key", rule: "hub-secret-key", stack: "kind",
		edit: set("hub.secretKey", "kubeconfig"),
		key:  "hub.secretKey", value: "kubeconfig",
		says: "admin.kubeconfig"},
	{name: "hub validity", rule: "hub-validity", stack: "kind",
		edit: set("hub.kubeconfigValidity", "365d"),
		key:  "hub.kubeconfigValidity", value: "365d",
		says: "duration"},
	{name: "remint generation negative", rule: "remint-generation", stack: "kind",
		edit: set("hub.remintGeneration", -1),
		key:  "hub.remintGeneration", value: "-1",
		says: "0 or more"},
	{name: "hub copy schedule", rule: "cron", stack: "gke",
		edit: set("hub.copySchedule", "every 10 minutes"),
		key:  "hub.copySchedule", value: "every 10 minutes",
		says: "CronJob schedule"},
}

// hubAcceptances are values next to the refusals above that Kubernetes takes, so the
// config takes them too.
var hubAcceptances = []acceptance{
	{name: "hub namespace starting with a digit", stack: "kind", edit: set("hub.namespace", "1railgrid")},
	{name: "hub namespace of 63 characters", stack: "gke", edit: set("hub.namespace", strings.Repeat("n", 63))},
	{name: "hub secret name with dots", stack: "kind", edit: set("hub.secretName", "railgrid.kcp.1")},
	{name: "hub copy schedule as a descriptor", stack: "kind", edit: set("hub.copySchedule", "@hourly")},
}

// The copy's period, which verify's certificates check waits before it fails, is the
// longest gap between two runs of hub.copySchedule.
func TestCopyPeriodIsTheLongestGapBetweenRuns(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 3, 0, 0, time.UTC)
	for schedule, want := range map[string]time.Duration{
		"*/10 * * * *":  10 * time.Minute,
		"0,15 * * * *":  45 * time.Minute,
		"@daily":        24 * time.Hour,
		"0 9 * * 1":     7 * 24 * time.Hour,
		"every 10 mins": 0,
	} {
		if got := (config.Hub{CopySchedule: schedule}).CopyPeriod(now); got != want {
			t.Errorf("%q: %s, want %s", schedule, got, want)
		}
	}
}
