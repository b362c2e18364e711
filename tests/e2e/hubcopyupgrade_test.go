//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// A stack made by the program before the copy existed: Pulumi applied the hub Secret's
// data itself, under naming.FieldManager. Its first up with the copy applies the Secret
// without data; under the same manager that apply would delete the data until the copy
// ran, and for good if the copy failed. The program applies the Secret under a manager
// of its own (naming.HubSecretFieldManager), which leaves the data where it is.

// hubDataWatch polls the hub Secret while an up runs and keeps what it saw missing.
type hubDataWatch struct {
	mu      sync.Mutex
	gaps    []string
	samples int
	stop    func()
	done    chan struct{}
}

// hubSecretAsAnEarlierVersionLeftIt gives the data of the hub Secret to the manager that
// applied it before the copy existed, as an earlier version of the program left it,
// and starts watching the Secret for the re-mint's up that follows.
func hubSecretAsAnEarlierVersionLeftIt(t *testing.T, l *lifecycle) {
	ctx, hub := l.ctx, l.plan.cfg.Hub
	secrets := l.c.kube.CoreV1().Secrets(hub.Namespace)
	s, err := secrets.Get(ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var moved bool
	for i, f := range s.ManagedFields {
		if f.Manager == naming.HubCopy {
			s.ManagedFields[i].Manager, moved = naming.FieldManager, true
		}
	}
	if !moved {
		t.Fatalf("the hub Secret's data has no manager %s: %v", naming.HubCopy, managers(s.ManagedFields))
	}
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s, err = secrets.Get(ctx, hub.SecretName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if owner := dataOwners(s.ManagedFields); len(owner) != 1 || owner[0] != naming.FieldManager {
		t.Fatalf("the hub Secret's data is owned by %v, want %s alone", owner, naming.FieldManager)
	}
	t.Logf("the hub Secret's data is owned by %s alone, as before the copy existed", naming.FieldManager)

	wctx, cancel := context.WithCancel(ctx)
	w := &hubDataWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for wctx.Err() == nil {
			s, err := secrets.Get(wctx, hub.SecretName, metav1.GetOptions{})
			w.mu.Lock()
			w.samples++
			switch {
			case err != nil && wctx.Err() == nil:
				w.gaps = append(w.gaps, time.Now().Format(time.TimeOnly)+": "+err.Error())
			case err == nil && len(s.Data[hub.SecretKey]) == 0:
				w.gaps = append(w.gaps, time.Now().Format(time.TimeOnly)+": no "+hub.SecretKey)
			}
			w.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	l.hubWatch = w
}

// hubSecretKeptItsDataThroughTheUp: through the re-mint's up, which applied the hub
// Secret without data under its own manager and then copied the new credential, the
// Secret never lacked its kubeconfig, and the copy owns the data now.
func hubSecretKeptItsDataThroughTheUp(t *testing.T, l *lifecycle) {
	w := l.hubWatch
	if w == nil {
		t.Fatal("no watch of the hub Secret: the step before did not run")
	}
	w.stop()
	<-w.done
	if len(w.gaps) > 0 {
		t.Errorf("the hub Secret lacked its kubeconfig during the up, %d of %d reads: %s", len(w.gaps), w.samples, strings.Join(w.gaps, "; "))
	} else {
		t.Logf("the hub Secret held its kubeconfig at each of %d reads during the up", w.samples)
	}
	hub := l.plan.cfg.Hub
	s, err := l.c.kube.CoreV1().Secrets(hub.Namespace).Get(l.ctx, hub.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owners := dataOwners(s.ManagedFields)
	found := false
	for _, o := range owners {
		found = found || o == naming.HubCopy
	}
	if !found {
		t.Errorf("after the up the hub Secret's data is owned by %v, not by the copy %s", owners, naming.HubCopy)
	}
	t.Logf("after the up: data owned by %v; managers %v", owners, managers(s.ManagedFields))
}

// dataOwners are the managers whose fields include the hub Secret's data.
func dataOwners(fields []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, f := range fields {
		if f.FieldsV1 != nil && strings.Contains(string(f.FieldsV1.Raw), `"f:data"`) {
			out = append(out, f.Manager)
		}
	}
	return out
}

func managers(fields []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, f := range fields {
		out = append(out, fmt.Sprintf("%s (%s)", f.Manager, f.Operation))
	}
	return out
}
