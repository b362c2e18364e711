package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A run that holds the node lock records in the lock file what it makes outside its own
// process: the directories its servers run in (their working directories, and where the
// node mounts), containerd's socket (whose shims outlive containerd), the network
// namespaces it names, its bridge and routes, and the sysctls it changed. A run that
// ends normally removes all of it and empties the record. A run killed with SIGKILL
// cannot: the next run that takes the lock finds the record and sweeps what it names
// before it sets up a node of its own.

// runRecord is what the lock file holds while a run has the node.
type runRecord struct {
	PID int `json:"pid"`
	// Dirs: every process whose working directory is under one of them is the run's,
	// with everything it started; every mount under them is the run's.
	Dirs []string `json:"dirs,omitempty"`
	// Sockets are containerd sockets; the shims started with one are the run's.
	Sockets []string `json:"sockets,omitempty"`
	// Netns are network namespaces the run named itself (test hosts on the pod network).
	Netns []string `json:"netns,omitempty"`
	// Network is the node network's options, for its bridge, routes and chain.
	Network *NodeNetworkOptions `json:"network,omitempty"`
	// Sysctls are the values to put back.
	Sysctls map[string]string `json:"sysctls,omitempty"`
}

// nodeRun is the record of the run in this process, written to the lock file on every
// change.
type nodeRun struct {
	mu     sync.Mutex
	file   *os.File
	record runRecord
}

// current is the run that holds the node lock in this process (nil when none does).
var (
	currentMu sync.Mutex
	current   *nodeRun
)

func (r *nodeRun) update(change func(*runRecord)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	change(&r.record)
	data, _ := json.Marshal(r.record)
	if err := r.file.Truncate(0); err == nil {
		_, _ = r.file.WriteAt(append(data, '\n'), 0)
		_ = r.file.Sync()
	}
}

// clear empties the record once everything it names is gone.
func (r *nodeRun) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record = runRecord{}
	_ = r.file.Truncate(0)
}

// RecordRunDir adds dir to the record of the run that holds the node lock in this
// process, so that a next run sweeps the processes and mounts under it if this one is
// killed. Without the lock it does nothing: nothing outside the test is made then.
func RecordRunDir(dir string) {
	recordRun(func(r *runRecord) {
		if !slices.Contains(r.Dirs, dir) {
			r.Dirs = append(r.Dirs, dir)
		}
	})
}

func recordRun(change func(*runRecord)) {
	currentMu.Lock()
	run := current
	currentMu.Unlock()
	if run != nil {
		run.update(change)
	}
}

// readRecord reads the record a previous holder of the lock left.
func readRecord(f *os.File) (runRecord, error) {
	var rec runRecord
	data, err := os.ReadFile(f.Name())
	if err != nil || len(strings.TrimSpace(string(data))) == 0 {
		return rec, err
	}
	return rec, json.Unmarshal(data, &rec)
}

// sweep removes what a killed run recorded: its processes, with everything they
// started; the containers of its containerd; its mounts; its network namespaces; the
// iptables chains of its kube-proxy and kubelet; its bridge, routes and chain; and it
// puts its sysctls back. It returns what it found, for the log.
func sweep(rec runRecord) []string {
	var found []string
	for round := 0; round < 5; round++ {
		pids := sweptProcesses(rec)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if round == 0 {
				found = append(found, fmt.Sprintf("process %d (%s)", pid, processName(pid)))
			}
			killPID(pid)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, dir := range rec.Dirs {
		for _, p := range mountsUnder(dir) {
			found = append(found, "mount "+p)
		}
		unmountAll(mountsUnder(dir))
	}
	for _, name := range rec.Netns {
		if _, err := os.Stat(filepath.Join(netnsDir, name)); err == nil {
			found = append(found, "network namespace "+name)
			removeNetns(name)
		}
	}
	if rec.Network != nil {
		if exec.Command("ip", "link", "show", rec.Network.Bridge).Run() == nil {
			found = append(found, "bridge "+rec.Network.Bridge)
		}
		(&NodeNetwork{NodeNetworkOptions: *rec.Network}).removeLeftovers()
	}
	if chains := kubeChains(); len(chains) > 0 {
		found = append(found, "iptables chains "+strings.Join(chains, " "))
		removeKubeChains(func(string, ...any) {})
	}
	for key, v := range rec.Sysctls {
		_ = os.WriteFile(filepath.Join("/proc/sys", key), []byte(v), 0o644)
	}
	return found
}

// sweptProcesses lists the live processes of a recorded run: those whose working
// directory is under one of its directories, the shims of its containerd, and every
// descendant of either (the containers are the shims' children).
func sweptProcesses(rec runRecord) []int {
	procs := processTable()
	roots := map[int]bool{}
	for pid, p := range procs {
		if pid == os.Getpid() {
			continue
		}
		if under(p.cwd, rec.Dirs) || isShimOf(p.args, rec.Sockets) {
			roots[pid] = true
		}
	}
	var out []int
	for pid := range procs {
		for a := pid; a > 1; a = procs[a].ppid {
			if roots[a] {
				out = append(out, pid)
				break
			}
			if _, ok := procs[a]; !ok {
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

type procInfo struct {
	ppid int
	cwd  string
	args []string
}

// processTable reads every process's parent, working directory and command line.
func processTable() map[int]procInfo {
	out := map[int]procInfo{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fields, err := statFields(pid)
		if err != nil || len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = procInfo{ppid: ppid, cwd: cwd, args: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")}
	}
	return out
}

// statFields returns the fields of /proc/<pid>/stat after the command name: state,
// ppid, pgrp, session, ...
func statFields(pid int) ([]string, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(stat)
	return strings.Fields(s[strings.LastIndex(s, ")")+1:]), nil
}

func processName(pid int) string {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(comm))
}

func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

func isShimOf(args []string, sockets []string) bool {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	for _, s := range sockets {
		if slices.Contains(args, s) {
			return true
		}
	}
	return false
}

// Leftovers lists what of a run is still on the machine: processes (with a working
// directory under dirs, or shims of the sockets, and their descendants), mounts under
// dirs, its network namespaces, its bridge, and the node's iptables chains (kube-proxy's
// and the kubelet's KUBE-* chains, the forwarding chain). A test of the clean-up holds a
// finished run to it, with the node lock held so that no other node's chains are there.
// nodeChains=false leaves the iptables chains out, for a run whose successor holds the
// node now and has chains of the same names.
func Leftovers(dirs, sockets, netns []string, bridge string, nodeChains bool) []string {
	var out []string
	for _, pid := range sweptProcesses(runRecord{Dirs: dirs, Sockets: sockets}) {
		out = append(out, fmt.Sprintf("process %d (%s)", pid, processName(pid)))
	}
	for _, d := range dirs {
		for _, m := range mountsUnder(d) {
			out = append(out, "mount "+m)
		}
	}
	names := netnsNames()
	for _, n := range netns {
		if names[n] {
			out = append(out, "network namespace "+n)
		}
	}
	if bridge != "" && exec.Command("ip", "link", "show", bridge).Run() == nil {
		out = append(out, "bridge "+bridge)
	}
	if !nodeChains {
		return out
	}
	for _, c := range kubeChains() {
		out = append(out, "iptables chain "+c)
	}
	if exec.Command("iptables", "-w", "-t", "mangle", "-S", forwardChain).Run() == nil {
		out = append(out, "iptables chain mangle/"+forwardChain)
	}
	return out
}

// kubeChains lists the KUBE-* chains of every table, as table/chain.
func kubeChains() []string {
	var out []string
	for _, table := range []string{"filter", "nat", "mangle"} {
		rules, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		if err != nil {
			continue
		}
		for _, l := range ruleLines(rules, "-N KUBE-") {
			out = append(out, table+"/"+strings.TrimPrefix(l, "-N "))
		}
	}
	return out
}
