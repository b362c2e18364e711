//go:build linux

package snapshots

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/railgrid/railgrid-kcp/naming"
)

// The gke stack's defragmentation CronJob's pod (etcdjobs.DefragScript, in busybox),
// run against the three members of the gke plan's StatefulSet after writes, deletes and
// a compaction: the database files shrink member by member, the leader last; with one
// member down, no member is defragmented.

// defragFacts are the members' database sizes (etcdctl endpoint status) before and after
// the defragmentation pod ran, by the client URL the pod names each member by, and the
// leader's URL.
type defragFacts struct {
	Before, After map[string]int64
	Leader        string
	Stopped       string `json:",omitempty"`
}

// memberStatus is one member's `etcdctl endpoint status -w json`.
type memberStatus struct {
	Status struct {
		Header struct {
			MemberID uint64 `json:"member_id"`
			Revision int64  `json:"revision"`
		} `json:"header"`
		Leader uint64 `json:"leader"`
		DBSize int64  `json:"dbSize"`
	} `json:"Status"`
}

func statusOf(in childInput, member int) (memberStatus, error) {
	out, err := exec.Command(filepath.Join(in.EtcdTools, "etcdctl"), "--endpoints=http://"+memberIP(member)+":2379",
		"--command-timeout=20s", "endpoint", "status", "-w", "json").CombinedOutput()
	if err != nil {
		return memberStatus{}, fmt.Errorf("etcdctl endpoint status of member %d: %v: %s", member, err, out)
	}
	var st []memberStatus
	if err := json.Unmarshal(out, &st); err != nil || len(st) != 1 {
		return memberStatus{}, fmt.Errorf("etcdctl endpoint status of member %d: %v: %s", member, err, out)
	}
	return st[0], nil
}

// defragScenario: three members, keys written, deleted and compacted away, then the
// defragmentation pod; with stopMember >= 0, that member is stopped first.
func defragScenario(in childInput, res *childResult, runner podRunner, stopMember int) error {
	const members = 3
	if err := provideClaims(in, runner, members); err != nil {
		return err
	}
	started, err := startMembers(in, runner, "gke", members)
	if err != nil {
		return err
	}
	defer stopMembers(started)
	value := strings.Repeat("x", 100_000)
	for i := 0; i < 40; i++ {
		if out, err := etcdctl(in, "put", fmt.Sprintf("/registry/defrag/%02d", i), value); err != nil {
			return fmt.Errorf("etcdctl put: %v: %s", err, out)
		}
	}
	if out, err := etcdctl(in, "del", "--prefix", "/registry/defrag/"); err != nil {
		return fmt.Errorf("etcdctl del: %v: %s", err, out)
	}
	st, err := statusOf(in, 0)
	if err != nil {
		return err
	}
	if out, err := etcdctl(in, "compact", fmt.Sprint(st.Status.Header.Revision), "--physical"); err != nil {
		return fmt.Errorf("etcdctl compact: %v: %s", err, out)
	}
	facts := &defragFacts{Before: map[string]int64{}, After: map[string]int64{}}
	res.Defrag = facts
	sizes := func(into map[string]int64) error {
		for i := 0; i < members; i++ {
			if i == stopMember {
				continue
			}
			st, err := statusOf(in, i)
			if err != nil {
				return err
			}
			into[naming.EtcdClientURL(in.Shard, i)] = st.Status.DBSize
			if st.Status.Leader == st.Status.Header.MemberID {
				facts.Leader = naming.EtcdClientURL(in.Shard, i)
			}
		}
		return nil
	}
	if stopMember >= 0 {
		started[stopMember].stop()
		facts.Stopped = naming.EtcdClientURL(in.Shard, stopMember)
	}
	if err := sizes(facts.Before); err != nil {
		return err
	}
	run, err := runner.run("defrag", in.Pods["defrag"])
	res.Runs = append(res.Runs, run)
	if err != nil {
		return err
	}
	return sizes(facts.After)
}

var defragged = regexp.MustCompile(`(?m)^defragmented (\S+) \((leader|follower)\): database size (\d+) -> (\d+) bytes`)

// TestDefragmentsEveryMemberTheLeaderLast: each member's database file shrinks, the
// followers first and the leader last, and the script's sizes are etcdctl's.
func TestDefragmentsEveryMemberTheLeaderLast(t *testing.T) {
	env := prerequisites(t)
	res := runScenario(t, env, "defrag", 0)
	require.Len(t, res.Runs, 1)
	c := res.Runs[0].container("defrag")
	require.True(t, c.Ran)
	require.Zero(t, c.Exit, "the defragmentation failed:\n%s", c.Output)
	f := res.Defrag
	require.NotNil(t, f)
	lines := defragged.FindAllStringSubmatch(c.Output, -1)
	require.Len(t, lines, 3, "one line per member:\n%s", c.Output)
	for i, m := range lines {
		want := "follower"
		if i == len(lines)-1 {
			want = "leader"
			require.Equal(t, f.Leader, m[1], "the leader (etcdctl) is defragmented last")
		}
		require.Equal(t, want, m[2], m[0])
		require.Equal(t, fmt.Sprint(f.Before[m[1]]), m[3], "the script's size before is etcdctl's: %s", m[0])
		require.Less(t, f.After[m[1]], f.Before[m[1]]/2, "%s shrank (etcdctl: %d -> %d bytes)", m[1], f.Before[m[1]], f.After[m[1]])
		t.Logf("%s (%s): %d -> %d bytes (etcdctl endpoint status)", m[1], m[2], f.Before[m[1]], f.After[m[1]])
	}
	require.Contains(t, c.Output, "defragmented 3 members of root's etcd, the leader last")
}

// TestDefragSkipsWhenAMemberIsUnhealthy: with one member down, the pod fails saying so,
// and no member's database changes.
func TestDefragSkipsWhenAMemberIsUnhealthy(t *testing.T) {
	env := prerequisites(t)
	res := runScenario(t, env, "defrag-unhealthy", 0)
	require.Len(t, res.Runs, 1)
	c := res.Runs[0].container("defrag")
	require.True(t, c.Ran)
	require.NotZero(t, c.Exit, "the defragmentation passed with a member down:\n%s", c.Output)
	f := res.Defrag
	require.NotNil(t, f)
	require.Contains(t, c.Output, "skipped: member "+f.Stopped+" of root's etcd is not healthy, so no member is defragmented")
	require.NotRegexp(t, defragged, c.Output)
	require.Len(t, f.After, 2)
	for url, before := range f.Before {
		require.Equal(t, before, f.After[url], "%s was left as it was", url)
	}
	t.Logf("with %s down: %s; the others' sizes unchanged: %v", f.Stopped, strings.TrimSpace(c.Output), f.After)
}
