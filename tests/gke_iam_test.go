package tests

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/internal/mockstack"
	"github.com/railgrid/railgrid-kcp/naming"
)

// The IAM contract of the snapshot and drill jobs, as Google documents it. Nothing here
// can run against Google Cloud offline: the permissions are data from Google's pages,
// cited per entry, and the commands and grants are read from the program's objects.

// gcsRolePermissions are the permissions of the Cloud Storage predefined roles the
// program may grant, from "IAM roles for Cloud Storage"
// (https://cloud.google.com/storage/docs/access-control/iam-roles), table "Predefined
// roles", with the descriptions quoted.
var gcsRolePermissions = map[string][]string{
	// "Allows users to create objects. Does not give permission to view, delete, or
	// replace objects."
	"roles/storage.objectCreator": {
		"orgpolicy.policy.get", "resourcemanager.projects.get", "resourcemanager.projects.list",
		"storage.objects.create", "storage.managedFolders.create",
		"storage.multipartUploads.create", "storage.multipartUploads.abort", "storage.multipartUploads.listParts",
	},
	// "Grants access to view objects and their metadata, excluding ACLs. Can also list
	// the objects and managed folders in a bucket."
	"roles/storage.objectViewer": {
		"resourcemanager.projects.get", "resourcemanager.projects.list",
		"storage.managedFolders.get", "storage.managedFolders.list",
		"storage.objects.get", "storage.objects.list",
	},
	// "Grants access to create, view, list, update, and delete objects and managed
	// folders, along with their metadata" (the object permissions of its list); here so
	// that the negative case can show a role that adds delete.
	"roles/storage.objectUser": {
		"storage.objects.create", "storage.objects.delete", "storage.objects.get", "storage.objects.list", "storage.objects.update",
	},
}

// snapshotDestroyingPermissions delete, overwrite or rewrite a snapshot, or let the holder
// grant that to itself. An object overwrite needs storage.objects.delete ("Upload objects
// from a file system", Required roles: "storage.objects.delete: only required for uploads
// that overwrite an existing object",
// https://cloud.google.com/storage/docs/uploading-objects#required-roles).
var snapshotDestroyingPermissions = []string{
	"storage.objects.delete", "storage.objects.update", "storage.objects.setIamPolicy",
	"storage.objects.setRetention", "storage.objects.overrideUnlockedRetention",
	"storage.buckets.delete", "storage.buckets.update", "storage.buckets.setIamPolicy",
	"storage.folders.delete", "storage.folders.rename", "storage.managedFolders.delete",
}

// gcloudStorageCommand is one kind of gcloud storage call and what Google documents it
// needs.
type gcloudStorageCommand struct {
	name    string
	pattern *regexp.Regexp // matches the call in a script
	needs   []string
	source  string
}

var gcloudStorageCommands = []gcloudStorageCommand{
	{
		name:    "upload (gcloud storage cp <file> gs://...)",
		pattern: regexp.MustCompile(`gcloud storage cp (--[a-z-]+ )*/`),
		// "Upload objects from a file system", Required roles: storage.objects.create;
		// storage.objects.get and storage.objects.list "only required if you plan on
		// using the Google Cloud CLI to perform uploads"; delete only for an overwrite,
		// which --no-clobber never does.
		needs:  []string{"storage.objects.create", "storage.objects.get", "storage.objects.list"},
		source: "https://cloud.google.com/storage/docs/uploading-objects#required-roles",
	},
	{
		name:    "list (gcloud storage ls gs://...)",
		pattern: regexp.MustCompile(`gcloud storage ls "?(gs://|\$\{)`),
		// "List objects", Required permissions: storage.objects.list (getIamPolicy only to
		// return ACLs, buckets.list only for the console).
		needs:  []string{"storage.objects.list"},
		source: "https://cloud.google.com/storage/docs/listing-objects#required-roles",
	},
	{
		name:    "download (gcloud storage cp gs://... <file>)",
		pattern: regexp.MustCompile(`gcloud storage cp (--[a-z-]+ )*"?(gs://|\$\{)`),
		// "Download objects", Required permissions: storage.objects.get (storage.objects.list
		// and storage.buckets.list "only required for using the Google Cloud console").
		needs:  []string{"storage.objects.get"},
		source: "https://cloud.google.com/storage/docs/downloading-objects#required-roles",
	},
}

var anyGcloudCall = regexp.MustCompile(`\bgcloud [a-z-]+( [a-z-]+)?`)

// jobIAM is what one CronJob's pod runs and the bucket roles of its Google account.
type jobIAM struct {
	job     string
	scripts []string
	roles   []string
}

// jobsIAM reads, for every snapshot and drill CronJob (not the defragmentation's), the scripts its containers run
// and the roles the program grants on the bucket to the Google service account behind
// the pod's Kubernetes ServiceAccount.
func jobsIAM(t *testing.T, rec *mockstack.Recording) []jobIAM {
	t.Helper()
	var out []jobIAM
	for _, res := range rec.ByType("kubernetes:batch/v1:CronJob") {
		cj := inputs(res)
		if getString(t, cj, "metadata.name") == naming.HubCopy {
			continue // copies the hub's kubeconfig in the cluster, with no Google account
		}
		if labels, _ := get(t, cj, "spec.jobTemplate.spec.template.metadata.labels").(map[string]any); labels[naming.EtcdJobLabel] == "defrag" {
			continue // calls etcd only, with no account (TestDefragJobsHaveNoAccount)
		}
		pod := get(t, cj, "spec.jobTemplate.spec.template.spec").(map[string]any)
		ksa := inputs(object(t, rec, "ServiceAccount", pod["serviceAccountName"].(string)))
		email := getString(t, ksa, "metadata.annotations.iam\\.gke\\.io/gcp-service-account")
		j := jobIAM{job: getString(t, cj, "metadata.name")}
		for _, grant := range rec.ByType("gcp:storage/bucketIAMMember:BucketIAMMember") {
			if g := inputs(grant); getString(t, g, "member") == "serviceAccount:"+email {
				j.roles = append(j.roles, getString(t, g, "role"))
			}
		}
		for _, c := range containersOf(pod) {
			argv := stringList(t, c, "command")
			if len(argv) == 3 && argv[0] == "bash" && argv[1] == "-c" {
				j.scripts = append(j.scripts, argv[2])
			}
		}
		out = append(out, j)
	}
	return out
}

// iamViolations checks the gcloud calls of the scripts against the roles: every needed
// permission granted, no granted permission that destroys a snapshot, no gcloud call
// without a contract entry.
func iamViolations(scripts, roles []string) []string {
	granted := map[string]bool{}
	var violations []string
	for _, role := range roles {
		perms, ok := gcsRolePermissions[role]
		if !ok {
			violations = append(violations, fmt.Sprintf("role %s: its permissions are not in the contract", role))
		}
		for _, p := range perms {
			granted[p] = true
		}
	}
	for _, p := range snapshotDestroyingPermissions {
		if granted[p] {
			violations = append(violations, fmt.Sprintf("granted %s: it can delete or overwrite snapshots", p))
		}
	}
	for _, script := range scripts {
		for _, line := range strings.Split(script, "\n") {
			calls := anyGcloudCall.FindAllString(line, -1)
			if len(calls) == 0 {
				continue
			}
			matched := false
			for _, cmd := range gcloudStorageCommands {
				if !cmd.pattern.MatchString(line) {
					continue
				}
				matched = true
				for _, p := range cmd.needs {
					if !granted[p] {
						violations = append(violations, fmt.Sprintf("%s needs %s (%s): not granted", cmd.name, p, cmd.source))
					}
				}
			}
			if !matched {
				violations = append(violations, fmt.Sprintf("no IAM contract entry for %q", strings.TrimSpace(line)))
			}
		}
	}
	sort.Strings(violations)
	return violations
}

// Each command of the snapshot and drill scripts has the permissions Google documents
// for it through the roles the program grants, and no granted role can delete or
// overwrite a snapshot. Negative cases: objectCreator alone (the obvious grant for an
// upload) lacks get and list, objectUser adds delete, and a gcloud call without a
// contract entry is reported.
func TestGKESnapshotIAMContract(t *testing.T) {
	rec := runStack(t, "gke")
	jobs := jobsIAM(t, rec)
	require.Len(t, jobs, 4, "snapshot and drill for root and alpha")
	calls := 0
	for _, j := range jobs {
		require.NotEmpty(t, j.roles, j.job)
		require.Empty(t, iamViolations(j.scripts, j.roles), "%s with %v", j.job, j.roles)
		for _, s := range j.scripts {
			calls += len(anyGcloudCall.FindAllString(s, -1))
		}
	}
	require.GreaterOrEqual(t, calls, 6, "the scripts' gcloud calls were found")

	var snapshot jobIAM
	for _, j := range jobs {
		if j.job == "etcd-root-snapshot" {
			snapshot = j
		}
	}
	require.Equal(t, []string{
		"upload (gcloud storage cp <file> gs://...) needs storage.objects.get (https://cloud.google.com/storage/docs/uploading-objects#required-roles): not granted",
		"upload (gcloud storage cp <file> gs://...) needs storage.objects.list (https://cloud.google.com/storage/docs/uploading-objects#required-roles): not granted",
	}, iamViolations(snapshot.scripts, []string{"roles/storage.objectCreator"}))
	require.Contains(t, iamViolations(snapshot.scripts, append(snapshot.roles, "roles/storage.objectUser")),
		"granted storage.objects.delete: it can delete or overwrite snapshots")
	require.Equal(t, []string{`no IAM contract entry for "gcloud storage rm gs://b/old.db"`},
		iamViolations([]string{"gcloud storage rm gs://b/old.db"}, snapshot.roles))
}
