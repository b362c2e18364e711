//go:build linux

package snapshots

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/components/etcdjobs"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/internal/etcdrestore"
	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
	"github.com/railgrid/railgrid-kcp/naming"
)

// restoreFacts are what a restore scenario saw, for the test to check.
type restoreFacts struct {
	Members  int    `json:"members"`
	Keys     int    `json:"keys"`     // written before the snapshot
	Snapshot string `json:"snapshot"` // the object the snapshot job uploaded
	Token    string `json:"token"`
	// RevisionBefore is the revision once a key was written after the snapshot.
	RevisionBefore int64 `json:"revisionBefore"`
	// Refused is the restore run while the member still ran (kind only).
	Refused *podRun `json:"refused,omitempty"`
	// After the restore, with the members started again from the StatefulSet's spec:
	KeysAfter     int      `json:"keysAfter"`
	AfterKeyFound bool     `json:"afterKeyFound"`
	RevisionAfter int64    `json:"revisionAfter"`
	OldRevision   string   `json:"oldRevision"` // etcdctl's answer to a read at RevisionBefore
	MemberList    []string `json:"memberList"`  // name=peer URL, as the members report them
	ClusterIDs    int      `json:"clusterIDs"`  // distinct cluster IDs the members report
	Leaders       int      `json:"leaders"`     // distinct leaders the members report
	PutAfter      string   `json:"putAfter"`    // a write's error after the restore ("" when it worked)
	// Aside are the claims whose data from before was moved aside, whole.
	Aside []string `json:"aside"`
	// DataOwners are the owners (uid:gid) of the restored data directories.
	DataOwners []string `json:"dataOwners"`
}

// The key written after the snapshot, which the restore must not bring back.
const afterSnapshotKey = "/registry/drill/after-snapshot"

// restoreScenario runs, on the root shard's etcd of the stack's StatefulSet (its pod
// template, listening on its own loopback address), what the end-to-end test and the
// runbook do: keys written, the gke plan's snapshot job, a key written after it, the
// members stopped, cmd/etcdrestore's Jobs (kind: the newest snapshot; gke: the one the
// snapshot job named), the members started again as the StatefulSet starts them.
func restoreScenario(ctx context.Context, in childInput, res *childResult, runner podRunner, gcs *testenv.GCSEmulator, stack string) error {
	cfg, err := config.ParseStackFile(in.StackFiles[stack])
	if err != nil {
		return err
	}
	facts := &restoreFacts{Members: cfg.Etcd.Members, Keys: in.Keys}
	res.Restore = facts
	if err := provideClaims(in, runner, cfg.Etcd.Members); err != nil {
		return err
	}
	if stack == "kind" {
		// An older object: the restore of the newest must not pick it.
		if err := gcs.Upload(ctx, in.Bucket, in.Shard+"/20000101T000000Z.db", []byte("an old snapshot the restore must not pick")); err != nil {
			return err
		}
	}
	members, err := startMembers(in, runner, stack, cfg.Etcd.Members)
	if err != nil {
		return err
	}
	defer stopMembers(members)
	if err := putKeys(in, "/registry/drill/key-%03d", in.Keys); err != nil {
		return err
	}
	snapshot, err := runner.run("snapshot", in.Pods["snapshot"])
	res.Runs = append(res.Runs, snapshot)
	if err != nil {
		return err
	}
	if c, failed := snapshot.failed(); failed {
		return fmt.Errorf("the snapshot job failed in %s", c.Name)
	}
	objects, err := gcs.Objects(ctx, in.Bucket, in.Shard+"/")
	if err != nil {
		return err
	}
	facts.Snapshot = "gs://" + in.Bucket + "/" + objects[len(objects)-1]
	if out, err := etcdctl(in, "put", afterSnapshotKey, "written after the snapshot"); err != nil {
		return fmt.Errorf("etcdctl put: %v: %s", err, out)
	}
	if facts.RevisionBefore, err = revision(in); err != nil {
		return err
	}

	opts := etcdrestore.Options{Config: cfg, Shard: in.Shard, Bucket: in.Bucket}
	for _, kv := range testenv.GCSEmulatorEnv(gcsURL) {
		opts.Env = append(opts.Env, etcdjobs.EnvVar{Name: kv[0], Value: kv[1]})
	}
	if stack == "kind" {
		// A restore while the member runs is refused before it touches the data.
		opts.ID = "while-running"
		pods, err := restorePods(opts)
		if err != nil {
			return err
		}
		run, err := runner.run("restore-while-running", pods[0])
		res.Runs = append(res.Runs, run)
		if err != nil {
			return err
		}
		facts.Refused = &run
	} else {
		opts.Snapshot = facts.Snapshot
	}

	stopMembers(members)
	opts.ID = "test"
	facts.Token = naming.EtcdRestoreToken(in.Shard, opts.ID)
	pods, err := restorePods(opts)
	if err != nil {
		return err
	}
	// The Jobs run side by side, as a cluster runs them.
	runs := make([]podRun, len(pods))
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i], errs[i] = runner.run(naming.EtcdRestoreJob(in.Shard, i, opts.ID), pod)
		}()
	}
	wg.Wait()
	res.Runs = append(res.Runs, runs...)
	for i, run := range runs {
		if errs[i] != nil {
			return errs[i]
		}
		if c, failed := run.failed(); failed {
			return fmt.Errorf("restore pod %s failed in %s", run.Pod, c.Name)
		}
	}
	for claim, dir := range runner.claims {
		if st, err := os.Stat(filepath.Join(dir, filepath.Base(naming.EtcdDataDir)+".before-"+facts.Token, "member")); err == nil && st.IsDir() {
			facts.Aside = append(facts.Aside, claim)
		}
		if st, err := os.Stat(filepath.Join(dir, filepath.Base(naming.EtcdDataDir))); err == nil {
			sys := st.Sys().(*syscall.Stat_t)
			facts.DataOwners = append(facts.DataOwners, fmt.Sprintf("%d:%d", sys.Uid, sys.Gid))
		}
	}

	if members, err = startMembers(in, runner, stack, cfg.Etcd.Members); err != nil {
		return err
	}
	defer stopMembers(members)
	return checkRestored(in, facts)
}

// restorePods are the restore Jobs' pod specs.
func restorePods(opts etcdrestore.Options) ([]podSpec, error) {
	jobs, err := etcdrestore.Jobs(opts)
	if err != nil {
		return nil, err
	}
	var pods []podSpec
	for _, j := range jobs {
		var ps podSpec
		if err := convert(j.Spec.Template.Spec, &ps); err != nil {
			return nil, err
		}
		pods = append(pods, ps)
	}
	return pods, nil
}

// startMembers starts the members from the stack's StatefulSet pod template, each with
// its claim, its name as its pod's name, and its listen addresses (0.0.0.0 in the
// template) on its own loopback address; the rest of its flags as the template has
// them. It returns once every member answers /health, which needs a quorum.
func startMembers(in childInput, runner podRunner, stack string, count int) ([]*runningPod, error) {
	var started []*runningPod
	for i := 0; i < count; i++ {
		var spec podSpec
		if err := convert(in.Members[stack], &spec); err != nil {
			return started, err
		}
		c := &spec.Containers[0]
		for j, a := range c.Args {
			if strings.HasPrefix(a, "--listen-") {
				c.Args[j] = strings.Replace(a, "0.0.0.0", memberIP(i), 1)
			}
		}
		spec.Volumes = append(spec.Volumes, volume{Name: naming.EtcdDataClaimTemplate, PersistentVolumeClaim: &struct {
			ClaimName string `json:"claimName"`
		}{ClaimName: naming.EtcdClaimName(in.Shard, i)}})
		pod, err := runner.start(naming.EtcdMemberName(in.Shard, i), spec)
		if err != nil {
			stopMembers(started)
			return nil, err
		}
		started = append(started, pod)
	}
	for i, pod := range started {
		if err := waitHTTP("http://"+memberIP(i)+":2379/health", time.Minute); err != nil {
			var logs []string
			for _, p := range started {
				logs = append(logs, p.name+":\n"+tail(p.stop()))
			}
			return nil, fmt.Errorf("member %s is not healthy: %v\n%s", pod.name, err, strings.Join(logs, "\n"))
		}
	}
	return started, nil
}

// provideClaims gives each of the shard's members' claims a directory of its own under
// the scenario's work directory, as the end-to-end test's provisioner makes a volume:
// writable by all.
func provideClaims(in childInput, runner podRunner, members int) error {
	for i := 0; i < members; i++ {
		claim := naming.EtcdClaimName(in.Shard, i)
		dir := filepath.Join(in.WorkDir, "claims", claim)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		runner.claims[claim] = dir
	}
	return nil
}

func stopMembers(members []*runningPod) {
	for _, m := range members {
		m.stop()
	}
}

// revision is the store's revision, read through member 0.
func revision(in childInput) (int64, error) {
	out, err := etcdctl(in, "get", "/", "--prefix", "--keys-only", "-w", "json")
	if err != nil {
		return 0, fmt.Errorf("etcdctl get: %v: %s", err, out)
	}
	var r struct {
		Header struct {
			Revision int64 `json:"revision"`
		} `json:"header"`
	}
	return r.Header.Revision, json.Unmarshal(out, &r)
}

// checkRestored reads what the restored members serve.
func checkRestored(in childInput, facts *restoreFacts) error {
	out, err := etcdctl(in, "get", "/", "--prefix", "--keys-only", "-w", "json")
	if err != nil {
		return fmt.Errorf("etcdctl get: %v: %s", err, out)
	}
	var count struct {
		Header struct {
			Revision int64 `json:"revision"`
		} `json:"header"`
		Count int `json:"count"`
	}
	if err := json.Unmarshal(out, &count); err != nil {
		return err
	}
	facts.KeysAfter, facts.RevisionAfter = count.Count, count.Header.Revision
	out, err = etcdctl(in, "get", afterSnapshotKey, "--print-value-only")
	if err != nil {
		return fmt.Errorf("etcdctl get: %v: %s", err, out)
	}
	facts.AfterKeyFound = len(bytes.TrimSpace(out)) > 0
	out, _ = etcdctl(in, "get", "/registry/drill/key-000", fmt.Sprintf("--rev=%d", facts.RevisionBefore))
	facts.OldRevision = strings.TrimSpace(string(out))

	out, err = etcdctl(in, "member", "list", "-w", "json")
	if err != nil {
		return fmt.Errorf("etcdctl member list: %v: %s", err, out)
	}
	var list struct {
		Members []struct {
			Name     string   `json:"name"`
			PeerURLs []string `json:"peerURLs"`
		} `json:"members"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return err
	}
	for _, m := range list.Members {
		facts.MemberList = append(facts.MemberList, m.Name+"="+strings.Join(m.PeerURLs, ","))
	}
	out, err = etcdctl(in, "endpoint", "status", "--cluster", "-w", "json")
	if err != nil {
		return fmt.Errorf("etcdctl endpoint status --cluster: %v: %s", err, out)
	}
	var statuses []struct {
		Status struct {
			Header struct {
				ClusterID json.Number `json:"cluster_id"`
			} `json:"header"`
			Leader json.Number `json:"leader"`
		} `json:"Status"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&statuses); err != nil {
		return fmt.Errorf("endpoint status: %w: %s", err, out)
	}
	clusters, leaders := map[string]bool{}, map[string]bool{}
	for _, s := range statuses {
		clusters[s.Status.Header.ClusterID.String()] = true
		leaders[s.Status.Leader.String()] = true
	}
	facts.ClusterIDs, facts.Leaders = len(clusters), len(leaders)
	if len(statuses) != facts.Members {
		facts.ClusterIDs = -len(statuses) // fewer members answered than there are
	}
	if out, err := etcdctl(in, "put", "/registry/drill/after-restore", "written after the restore"); err != nil {
		facts.PutAfter = fmt.Sprintf("%v: %s", err, out)
	}
	return nil
}

// checkRestore checks what every restore scenario must show: the restore Jobs ran all
// their steps; the members, started again from the StatefulSet's spec, form one cluster
// of the StatefulSet's members with one leader, and serve exactly the keys of the
// snapshot (the key written after it is gone, as it should be), at a revision bumped
// past a billion, with the revisions before marked compacted; they take writes; each
// member's data from before is kept aside, and the restored data belongs to the
// members' user.
func checkRestore(t *testing.T, res childResult, members int) *restoreFacts {
	t.Helper()
	f := res.Restore
	require.NotNil(t, f)
	restores := 0
	for _, run := range res.Runs {
		if !strings.Contains(run.Pod, "-restore-test") {
			continue
		}
		restores++
		for _, name := range []string{"fetch", "status", "set-aside", "restore"} {
			c := run.container(name)
			require.True(t, c.Ran, "%s: %s ran", run.Pod, name)
			require.Zero(t, c.Exit, "%s: %s", run.Pod, name)
		}
		require.Contains(t, run.container("fetch").Output, "restoring "+f.Snapshot, "%s restores the snapshot the job uploaded", run.Pod)
		require.Contains(t, run.container("set-aside").Output, "moved /var/lib/etcd/data aside to /var/lib/etcd/data.before-"+f.Token)
	}
	require.Equal(t, members, restores, "one restore pod per member")
	require.Equal(t, f.Keys, f.KeysAfter, "the restored members serve the snapshot's keys")
	require.False(t, f.AfterKeyFound, "the key written after the snapshot is gone")
	require.GreaterOrEqual(t, f.RevisionAfter, int64(etcdjobs.BumpRevision), "the revision is bumped")
	require.Greater(t, f.RevisionAfter, f.RevisionBefore)
	require.Contains(t, f.OldRevision, "required revision has been compacted", "the revisions before are marked compacted")
	var want []string
	for i := 0; i < members; i++ {
		want = append(want, naming.EtcdMemberName("root", i)+"="+naming.EtcdPeerURL("root", i))
	}
	require.ElementsMatch(t, want, f.MemberList, "the members of the StatefulSet, with their peer URLs")
	require.Equal(t, 1, f.ClusterIDs, "every member answers, in one cluster")
	require.Equal(t, 1, f.Leaders, "one leader")
	require.Empty(t, f.PutAfter, "the restored cluster takes writes")
	require.Len(t, f.Aside, members, "each member's data from before is kept aside")
	for _, owner := range f.DataOwners {
		require.Equal(t, fmt.Sprintf("%d:%d", naming.NonRootUID, naming.NonRootUID), owner, "the restored data belongs to the members' user")
	}
	require.Len(t, f.DataOwners, members)
	return f
}

// The kind stack's one member, restored from the newest snapshot (an older object is in
// the bucket too) by cmd/etcdrestore's Job, after the gke plan's snapshot job took it:
// what the end-to-end test does on the real node, here on loopback. A restore run while
// the member still runs is refused by the set-aside step, before it touches the data.
func TestRestoreKindMemberFromTheNewestSnapshot(t *testing.T) {
	env := prerequisites(t)
	res := runScenario(t, env, "restore-kind", 20)
	f := checkRestore(t, res, 1)
	require.NotNil(t, f.Refused)
	c, failed := f.Refused.failed()
	require.True(t, failed, "the restore while the member runs fails")
	require.Equal(t, "set-aside", c.Name)
	require.Contains(t, c.Output, "an etcd is running on /var/lib/etcd/data (/var/lib/etcd/data/member/snap/db is locked): scale its StatefulSet to 0 first")
	require.False(t, f.Refused.container("restore").Ran, "nothing restored over the running member")
}

// The gke stack's three members, each restored into its own volume by its own Job from
// the snapshot named on the command line, form the StatefulSet's cluster again: the
// three-member path of the runbook, on loopback.
func TestRestoreGKEThreeMembersFromANamedSnapshot(t *testing.T) {
	env := prerequisites(t)
	res := runScenario(t, env, "restore-gke", 20)
	f := checkRestore(t, res, 3)
	require.Nil(t, f.Refused)
	for _, run := range res.Runs {
		if strings.Contains(run.Pod, "-restore-test") {
			require.NotContains(t, run.container("fetch").Output, "cannot list", "a named snapshot is not looked up")
		}
	}
}
