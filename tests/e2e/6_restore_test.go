//go:build linux

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/railgrid/railgrid-kcp/internal/testkit/planjobs"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// Stage 6, restore: the root shard's etcd lost and restored from a snapshot, as
// docs/operations.md's runbook does it.
var restoreSteps = []step{
	{"a-snapshot-brings-kcp-back", aSnapshotBringsKcpBack, false},
}

// aSnapshotBringsKcpBack: disaster recovery, as docs/operations.md's runbook does it. The
// gke stack's snapshot job (its script and image) saves the kind stack's root-shard etcd
// to the bucket (fake-gcs-server); a second object is written after the snapshot; the
// writers stop, the etcd member and its volume are lost, the StatefulSet makes a fresh,
// empty one; cmd/etcdrestore's Job restores the snapshot into it; etcd and the operator
// start again. kcp then serves the first object in its Ready workspace, and the second
// is gone, as a restore to an earlier time must make it.
func aSnapshotBringsKcpBack(t *testing.T, l *lifecycle) {
	ctx, c, k := l.ctx, l.c, l.bins.kubectl
	run := func(args ...string) {
		t.Helper()
		if _, err := kubectl(ctx, k, c.kubeconfig, args...); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := planjobs.LoadGKE(filepath.Join(l.src.root, "Pulumi.gke.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// On alpha, which the restore does not touch: it must read back unchanged after it.
	durable := l.durableObject(t)
	if _, err := makeWorkspaceOnShard(ctx, l.env, restoreWorkspace, naming.RootShardName); err != nil {
		t.Fatal(err)
	}
	kept, err := writeKcpObject(ctx, l.env, restoreWorkspace, "written-before-the-snapshot", map[string]string{"when": "before"})
	if err != nil {
		t.Fatal(err)
	}

	fake, err := fakeGCS(ctx, l.src.root)
	if err != nil {
		t.Fatal(err)
	}
	gcs := gcsEmulator(t, c, fake)
	manifest, bucket, err := snapshotJobManifest(plan, gcs.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := gcs.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := runJob(ctx, c, k, manifest); err != nil {
		t.Fatal(err)
	}
	if err := waitJobs(ctx, l.env, k, "railgrid.io/e2e=snapshot", 5*time.Minute); err != nil {
		t.Fatalf("the gke stack's snapshot job against the kind stack's root etcd: %v", err)
	}
	objects, err := gcs.Objects(ctx, bucket, naming.RootShardName+"/")
	if err != nil || len(objects) != 1 {
		t.Fatalf("the bucket holds %v (%v), want one snapshot of the root shard", objects, err)
	}
	t.Logf("the gke stack's snapshot job saved gs://%s/%s in %s", bucket, objects[0], time.Since(start).Round(100*time.Millisecond))
	lost, err := writeKcpObject(ctx, l.env, restoreWorkspace, "written-after-the-snapshot", map[string]string{"when": "after"})
	if err != nil {
		t.Fatal(err)
	}

	// Runbook 2: stop the writers, the operator first.
	shard, kcpDeploy := naming.RootShardName, naming.RootShardDeployment(naming.RootShardName)
	sts, claim := naming.EtcdName(shard), naming.EtcdClaimName(shard, 0)
	run("-n", naming.NamespaceOperator, "scale", "deploy/"+naming.OperatorDeployment, "--replicas=0")
	run("-n", naming.NamespaceKcp, "scale", "deploy/"+kcpDeploy, "--replicas=0")
	run("-n", naming.NamespaceEtcd, "scale", "sts/"+sts, "--replicas=0")
	run("-n", naming.NamespaceOperator, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/name=kcp-operator", "--timeout=5m")
	run("-n", naming.NamespaceKcp, "wait", "--for=delete", "pod", "-l", naming.LabelComponent+"=rootshard,"+naming.LabelInstance+"="+shard, "--timeout=5m")
	run("-n", naming.NamespaceEtcd, "wait", "--for=delete", "pod", "-l", "app="+sts, "--timeout=5m")
	// The member's volume is lost.
	before := claimUID(ctx, c, claim)
	run("-n", naming.NamespaceEtcd, "delete", "pvc", claim, "--wait=true")
	// Runbook 3: the StatefulSet makes the claim again, on a new, empty volume.
	run("-n", naming.NamespaceEtcd, "scale", "sts/"+sts, "--replicas=1")
	run("-n", naming.NamespaceEtcd, "rollout", "status", "sts/"+sts, "--timeout=5m")
	run("-n", naming.NamespaceEtcd, "scale", "sts/"+sts, "--replicas=0")
	run("-n", naming.NamespaceEtcd, "wait", "--for=delete", "pod", "-l", "app="+sts, "--timeout=5m")
	if after := claimUID(ctx, c, claim); after == "" || after == before {
		t.Fatalf("claim %s was not made again (uid %q, was %q)", claim, after, before)
	}

	// Runbook 5: cmd/etcdrestore's Jobs, with gcloud pointed at the emulator.
	bin, err := l.etcdrestoreBin()
	if err != nil {
		t.Fatal(err)
	}
	restoreStart := time.Now()
	id := "e2e"
	args := []string{"-config", l.stack.cfgFile, "-shard", shard, "-bucket", bucket, "-id", id}
	for _, kv := range testenv.GCSEmulatorEnv(gcs.URL) {
		args = append(args, "-env", kv[0]+"="+kv[1])
	}
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		t.Fatalf("cmd/etcdrestore: %v", err)
	}
	if err := runJob(ctx, c, k, string(out)); err != nil {
		t.Fatal(err)
	}
	if err := waitJobs(ctx, l.env, k, "railgrid.io/etcd-restore="+id, 5*time.Minute); err != nil {
		t.Fatalf("the restore: %v", err)
	}
	t.Logf("cmd/etcdrestore's Job restored %s into the new claim in %s", objects[0], time.Since(restoreStart).Round(100*time.Millisecond))

	// Runbook 6 and 7: etcd, then the operator, which scales kcp back.
	run("-n", naming.NamespaceEtcd, "scale", "sts/"+sts, "--replicas=1")
	run("-n", naming.NamespaceEtcd, "rollout", "status", "sts/"+sts, "--timeout=5m")
	etcdReady := time.Now()
	members, err := kubectl(ctx, k, c.kubeconfig, "-n", naming.NamespaceEtcd, "exec", sts+"-0", "--", "/usr/local/bin/etcdctl", "member", "list", "-w", "table")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd after the restore:\n%s", members)
	run("-n", naming.NamespaceOperator, "scale", "deploy/"+naming.OperatorDeployment, "--replicas=1")
	var last string
	if err := testenv.WaitFor(ctx, 5*time.Minute, nil, func() (bool, error) {
		err := kept.readBack(ctx, l.env)
		if err == nil {
			var phase string
			if phase, err = workspacePhase(ctx, l.env, restoreWorkspace); err == nil && phase != "Ready" {
				err = fmt.Errorf("workspace root:%s is %s", restoreWorkspace, phase)
			}
		}
		if err != nil {
			last = err.Error()
		}
		return err == nil, nil
	}); err != nil {
		t.Fatalf("kcp does not serve %s after the restore: %v (last: %s)", kept, err, last)
	}
	t.Logf("kcp serves %s again in its Ready workspace, %s after etcd was Ready on the restored data (%s after the restore Job began, %s after the step began)",
		kept, time.Since(etcdReady).Round(time.Second), time.Since(restoreStart).Round(time.Second), time.Since(start).Round(time.Second))
	if err := goneFromKcp(ctx, l.env, lost); err != nil {
		t.Errorf("written after the snapshot, %v: the restore did not go back to the snapshot's time", err)
	} else {
		t.Logf("%s, written after the snapshot, is gone, as a restore to the snapshot's time must leave it", lost)
	}
	if err := durable.readBack(ctx, l.env); err != nil {
		t.Errorf("the object on alpha (not restored): %v", err)
	}
}
