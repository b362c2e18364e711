package components

import (
	"strings"
	"testing"
)

const kubeadmCorefile = ".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       fallthrough in-addr.arpa ip6.arpa\n    }\n    forward . /etc/resolv.conf\n    reload\n}\n"

func TestSplitHorizonStanzaIsAddedOnce(t *testing.T) {
	once, err := withSplitHorizonHosts(kubeadmCorefile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(once, "hosts /etc/railgrid-kcp/hosts") != 1 {
		t.Fatalf("stanza missing:\n%s", once)
	}
	twice, err := withSplitHorizonHosts(once)
	if err != nil {
		t.Fatal(err)
	}
	if twice != once {
		t.Fatalf("a second pass changed the Corefile:\n%s", twice)
	}
	if !strings.HasSuffix(once, "    reload\n}\n") {
		t.Fatalf("the rest of the Corefile must stay as it was:\n%s", once)
	}
}

func TestSplitHorizonRefusesACorefileItCannotExtend(t *testing.T) {
	if _, err := withSplitHorizonHosts("example.org:53 {\n    whoami\n}\n"); err == nil || !strings.Contains(err.Error(), "no .:53 server block") {
		t.Fatalf("want a missing server block error, got %v", err)
	}
	withHosts := strings.Replace(kubeadmCorefile, "    errors\n", "    errors\n    hosts /etc/hosts {\n        fallthrough\n    }\n", 1)
	if _, err := withSplitHorizonHosts(withHosts); err == nil || !strings.Contains(err.Error(), "already uses the hosts plugin") {
		t.Fatalf("want a hosts-plugin error, got %v", err)
	}
}
