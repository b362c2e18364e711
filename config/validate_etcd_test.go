package config_test

import "testing"

// etcd: members, volume size, storage class and the defragmentation's schedule
// (validate_etcd.go): each refusal below
// is refused naming its rule, key and value, and each acceptance, at the edge of a
// rule, is taken.
func TestEtcdRefusals(t *testing.T) { requireRefused(t, etcdRefusals) }

func TestEtcdAcceptances(t *testing.T) { requireAccepted(t, etcdAcceptances) }

var etcdRefusals = []refusal{
	{name: "etcd two members", rule: "etcd-members", stack: "gke",
		edit: set("etcd.members", 2),
		key:  "etcd.members", value: "2",
		says: "1, 3 or 5"},
	{name: "etcd zero members", rule: "etcd-members", stack: "kind",
		edit: set("etcd.members", 0),
		key:  "etcd.members", value: "0",
		says: "1, 3 or 5"},
	{name: "etcd volume size", rule: "etcd-volume-size", stack: "kind",
		edit: set("etcd.volumeSize", "20GB"),
		key:  "etcd.volumeSize", value: "20GB",
		says: "size"},
	{name: "etcd volume size zero", rule: "etcd-volume-size", stack: "kind",
		edit: set("etcd.volumeSize", "0Gi"),
		key:  "etcd.volumeSize", value: "0Gi",
		says: "greater than zero"},
	{name: "etcd volume size negative", rule: "etcd-volume-size", stack: "gke",
		edit: set("etcd.volumeSize", "-20Gi"),
		key:  "etcd.volumeSize", value: "-20Gi",
		says: "greater than zero"},
	{name: "etcd volume size in lower case", rule: "etcd-volume-size", stack: "kind",
		edit: set("etcd.volumeSize", "2gi"),
		key:  "etcd.volumeSize", value: "2gi",
		says: "quantities must match the regular expression"},
	{name: "etcd volume size with a space", rule: "etcd-volume-size", stack: "kind",
		edit: set("etcd.volumeSize", "2 Gi"),
		key:  "etcd.volumeSize", value: "2 Gi",
		says: "quantities must match the regular expression"},
	{name: "storage class empty", rule: "storage-class", stack: "kind",
		edit: set("etcd.storageClass", ""),
		key:  "etcd.storageClass", value: "",
		says: "StorageClass"},
	{name: "storage class in capitals", rule: "storage-class", stack: "gke",
		edit: set("etcd.storageClass", "Etcd-SSD"),
		key:  "etcd.storageClass", value: "Etcd-SSD",
		says: "RFC 1123 subdomain"},
	{name: "defrag schedule in words", rule: "cron", stack: "kind",
		edit: set("etcd.defragSchedule", "daily"),
		key:  "etcd.defragSchedule", value: "daily",
		says: "cron"},
	{name: "defrag schedule hour out of range", rule: "cron", stack: "gke",
		edit: set("etcd.defragSchedule", "15 24 * * *"),
		key:  "etcd.defragSchedule", value: "15 24 * * *",
		says: "above maximum (23)"},
	{name: "defrag schedule with a time zone", rule: "cron", stack: "kind",
		edit: set("etcd.defragSchedule", "CRON_TZ=UTC 15 4 * * *"),
		key:  "etcd.defragSchedule", value: "CRON_TZ=UTC 15 4 * * *",
		says: "spec.timeZone"},
	{name: "defrag schedule on 31 April", rule: "cron", stack: "gke",
		edit: set("etcd.defragSchedule", "0 4 31 4 *"),
		key:  "etcd.defragSchedule", value: "0 4 31 4 *",
		says: "would never run"},
	{name: "defrag schedule empty", rule: "cron", stack: "kind",
		edit: set("etcd.defragSchedule", ""),
		key:  "etcd.defragSchedule", value: "",
		says: "empty spec string"},
}

// etcdAcceptances are values next to the refusals above that Kubernetes takes, so the
// config takes them too.
var etcdAcceptances = []acceptance{
	{name: "etcd volume size 1.5Gi", stack: "kind", edit: set("etcd.volumeSize", "1.5Gi")},
	{name: "etcd volume size 2G", stack: "kind", edit: set("etcd.volumeSize", "2G")},
	{name: "etcd volume size in exponent form", stack: "gke", edit: set("etcd.volumeSize", "5e10")},
	{name: "etcd volume size of one byte", stack: "kind", edit: set("etcd.volumeSize", "1")},
	{name: "storage class starting with a digit", stack: "kind", edit: set("etcd.storageClass", "1-local-path")},
	{name: "storage class with dots", stack: "gke", edit: set("etcd.storageClass", "etcd.pd-ssd")},
	{name: "defrag schedule weekly", stack: "gke", edit: set("etcd.defragSchedule", "@weekly")},
	{name: "defrag schedule on Sundays by name", stack: "kind", edit: set("etcd.defragSchedule", "0 5 * * SUN")},
}
