package testenv

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// A machine of its own has its loopback, up, and nothing else; what fails in it is
// reported by name.
func TestRunOnOwnMachineHasOnlyItsLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	if Machine() != "" {
		t.Skip("runs on the host's network")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	run, err := RunOnOwnMachine(ctx, "t1", "^TestMachineChild$", time.Minute, time.Second, &out)
	if err != nil || !run.Passed {
		t.Fatalf("the machine: %+v, %v\n%s", run, err, out.String())
	}
	if !strings.Contains(out.String(), "[t1] --- PASS: TestMachineChild") {
		t.Errorf("the machine's output is not there, marked [t1]:\n%s", out.String())
	}
	out.Reset()
	run, err = RunOnOwnMachine(ctx, "fails", "^TestMachineChild$", time.Minute, time.Second, &out)
	if err != nil || run.Passed || !slices.Equal(run.Failed, []string{"TestMachineChild", "TestMachineChild/fails"}) {
		t.Errorf("a machine whose test fails: %+v, %v; want TestMachineChild and its subtest failed\n%s", run, err, out.String())
	}
}

// TestMachineChild is what TestRunOnOwnMachineHasOnlyItsLoopback runs on its machines.
func TestMachineChild(t *testing.T) {
	if Machine() == "" {
		t.Skip("runs on a machine of its own")
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifaces {
		names = append(names, i.Name)
		if i.Name == "lo" && i.Flags&net.FlagUp == 0 {
			t.Errorf("the loopback is down")
		}
	}
	if !slices.Equal(names, []string{"lo"}) {
		t.Errorf("the machine's interfaces are %v, want only lo", names)
	}
	if MachineScoped("x") != "x-"+Machine() {
		t.Errorf("MachineScoped(x) = %q on machine %s", MachineScoped("x"), Machine())
	}
	t.Run("fails", func(t *testing.T) {
		if Machine() == "fails" {
			t.Error("failing as asked")
		}
	})
}
