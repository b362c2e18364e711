package testenv

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// kubeletSysctls are what the kubelet writes when protectKernelDefaults is off. Unlike
// the node network's sysctls they are the kernel's, not a network namespace's, so nodes
// on machines of their own (RunOnOwnMachine) share them.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

// kernelTunablesFile records, while any node of any test runs, the kubelet's sysctls as
// they were before the first one started and the processes that hold them: the last to
// let go puts them back (the file stays, empty, as the node lock's does). A holder killed with SIGKILL is dropped by the next one, and
// the values recorded stay the ones to put back.
var kernelTunablesFile = "/run/railgrid-kcp-kernel-tunables.json"

// procSys is where the sysctls are (a test's directory in this package's own test).
var procSys = "/proc/sys"

type kernelTunables struct {
	Before  map[string]string `json:"before"`
	Holders []int             `json:"holders"`
}

// holdKernelTunables adds this process to the holders, recording the sysctls first if
// it is the only one, and returns what puts them back when the last holder goes.
func holdKernelTunables() (release func(), err error) { return holdKernelTunablesAs(os.Getpid()) }

func holdKernelTunablesAs(pid int) (release func(), err error) {
	if err := updateKernelTunables(func(k *kernelTunables) {
		if len(k.Holders) == 0 && k.Before == nil {
			k.Before = map[string]string{}
			for _, key := range kubeletSysctls {
				if v, err := os.ReadFile(filepath.Join(procSys, key)); err == nil {
					k.Before[key] = strings.TrimSpace(string(v))
				}
			}
		}
		k.Holders = append(k.Holders, pid)
	}); err != nil {
		return nil, err
	}
	return func() {
		_ = updateKernelTunables(func(k *kernelTunables) {
			if i := slices.Index(k.Holders, pid); i >= 0 {
				k.Holders = slices.Delete(k.Holders, i, i+1)
			}
		})
	}, nil
}

// updateKernelTunables changes the record under its lock, dropping holders that are
// gone; once none is left it puts the sysctls back and empties the record.
func updateKernelTunables(change func(*kernelTunables)) error {
	f, err := os.OpenFile(kernelTunablesFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return err
	}
	var k kernelTunables
	if data, _ := io.ReadAll(f); len(data) > 0 {
		_ = json.Unmarshal(data, &k)
	}
	k.Holders = slices.DeleteFunc(k.Holders, processGone)
	change(&k)
	var data []byte
	if len(k.Holders) == 0 {
		for key, v := range k.Before {
			_ = os.WriteFile(filepath.Join(procSys, key), []byte(v), 0o644)
		}
	} else if data, err = json.Marshal(k); err != nil {
		return err
	}
	// Emptied, not removed: another process may be waiting for the lock of this file.
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	return err
}
