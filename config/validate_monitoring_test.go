package config_test

import "testing"

// Scraping and alert thresholds (validate_monitoring.go): each refusal below is refused
// naming its rule, key and value, and each acceptance, at the edge of a rule, is taken.
func TestMonitoringRefusals(t *testing.T) { requireRefused(t, monitoringRefusals) }

func TestMonitoringAcceptances(t *testing.T) { requireAccepted(t, monitoringAcceptances) }

var monitoringRefusals = []refusal{
	{name: "negative scrape interval", rule: "monitoring-duration", stack: "kind",
		edit: set("monitoring.scrapeInterval", "-30s"),
		key:  "monitoring.scrapeInterval", value: "-30s",
		says: "positive Go duration"},
	{name: "days are not a Go duration", rule: "monitoring-duration", stack: "gke",
		edit: set("monitoring.alerts.certificateExpiry", "14d"),
		key:  "monitoring.alerts.certificateExpiry", value: "14d",
		says: "Go duration"},
	{name: "below a millisecond", rule: "monitoring-duration", stack: "kind",
		edit: set("monitoring.alerts.etcdFsyncLatency", "500us"),
		key:  "monitoring.alerts.etcdFsyncLatency", value: "500us",
		says: "whole milliseconds"},
	{name: "zero window", rule: "monitoring-duration", stack: "kind",
		edit: set("monitoring.alerts.rateWindow", "0s"),
		key:  "monitoring.alerts.rateWindow", value: "0s",
		says: "positive"},
	{name: "scrape interval longer than downFor", rule: "monitoring-window", stack: "kind",
		edit: set("monitoring.scrapeInterval", "5m"),
		key:  "monitoring.alerts.downFor", value: "2m",
		says: "scrape intervals"},
	{name: "rate window of one scrape", rule: "monitoring-window", stack: "gke",
		edit: set("monitoring.alerts.rateWindow", "30s"),
		key:  "monitoring.alerts.rateWindow", value: "30s",
		says: "needs two samples for a rate"},
	{name: "leader changes window of one scrape", rule: "monitoring-window", stack: "kind",
		edit: set("monitoring.alerts.leaderChangesWindow", "45s"),
		key:  "monitoring.alerts.leaderChangesWindow", value: "45s",
		says: "scrape intervals"},
	{name: "quota percent 100", rule: "monitoring-percent", stack: "kind",
		edit: set("monitoring.alerts.etcdDatabaseQuotaPercent", 100),
		key:  "monitoring.alerts.etcdDatabaseQuotaPercent", value: "100",
		says: "1 to 99"},
	{name: "error percent 0", rule: "monitoring-percent", stack: "gke",
		edit: set("monitoring.alerts.frontProxyErrorPercent", 0),
		key:  "monitoring.alerts.frontProxyErrorPercent", value: "0",
		says: "1 to 99"},
	{name: "no leader changes", rule: "monitoring-count", stack: "kind",
		edit: set("monitoring.alerts.etcdLeaderChanges", 0),
		key:  "monitoring.alerts.etcdLeaderChanges", value: "0",
		says: "1 or more"},
	{name: "unknown threshold", rule: "unknown-key", stack: "kind",
		edit: set("monitoring.alerts.etcdDiskPercent", 80),
		key:  "monitoring.alerts.etcdDiskPercent", value: "80",
		says: "is not a key of monitoring.alerts"},
}

var monitoringAcceptances = []acceptance{
	{name: "windows of exactly two scrapes", stack: "kind", edit: func(values map[string]any) {
		set("monitoring.scrapeInterval", "1m")(values)
		set("monitoring.alerts.downFor", "2m")(values)
		set("monitoring.alerts.rateWindow", "2m")(values)
		set("monitoring.alerts.leaderChangesWindow", "2m")(values)
	}},
	{name: "percentages at the edges", stack: "gke", edit: func(values map[string]any) {
		set("monitoring.alerts.etcdDatabaseQuotaPercent", 99)(values)
		set("monitoring.alerts.frontProxyErrorPercent", 1)(values)
	}},
	{name: "fsync latency of one millisecond", stack: "kind", edit: set("monitoring.alerts.etcdFsyncLatency", "1ms")},
}
