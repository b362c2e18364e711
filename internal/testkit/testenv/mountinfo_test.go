package testenv

import (
	"reflect"
	"testing"
)

func TestParseMountsReadsPointOptionsAndPropagation(t *testing.T) {
	// Lines as this machine's kernel wrote them: a pod's namespace under /run/netns with
	// no optional field, the shared self-bind of /run/netns, and an escaped space.
	table := `44 26 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw,discard
48 26 0:4 net:[4026532174] /run/netns/cni-b9a7 rw - nsfs nsfs rw
90 44 0:50 / /tmp/a\040b ro,nosuid shared:7 master:3 - tmpfs tmpfs rw
`
	want := []mount{
		{point: "/run/netns", options: []string{"rw", "relatime"}, propagation: []string{"shared:1"}},
		{point: "/run/netns/cni-b9a7", options: []string{"rw"}},
		{point: "/tmp/a b", options: []string{"ro", "nosuid"}, propagation: []string{"shared:7", "master:3"}},
	}
	if got := parseMounts(table); !reflect.DeepEqual(got, want) {
		t.Errorf("parseMounts =\n%+v\nwant\n%+v", got, want)
	}
}
