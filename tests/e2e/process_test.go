//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/railgrid/railgrid-kcp/internal/testkit/testenv"
)

// Environment variables the test reads, besides testenv.EnvCRDsDir and
// testenv.EnvThirdpartyDir.
const (
	envSkip = "RAILGRID_SKIP_E2E"
	// envVerbose=1 also prints the controllers' and the control plane's logs of a passing run.
	envVerbose = "RAILGRID_E2E_VERBOSE"
	// envKeep=1 keeps the control plane's data and logs, the workspace and the state.
	envKeep = "RAILGRID_E2E_KEEP"
)

// binaries are the executables the test runs, all found on PATH.
type binaries struct {
	kubeAPIServer, kubeControllerManager, kubeScheduler string
	etcd, kwok, pulumi, provider                        string
	langhost                                            string // pulumi-language-go, which runs main.go
	// The real controllers: kcp-operator and cert-manager's controller (the binaries of
	// their images, and cert-manager's controller also as killed-up's process).
	kcpOperator, certManager string
	// certManagerImages are the binaries of cert-manager's four images, by component;
	// envoyGateway is the Envoy Gateway control plane of its image.
	certManagerImages map[testenv.CertManagerComponent]string
	envoyGateway      string
	// helm packages and pushes the charts the test's mirrors serve.
	helm string
	// kubectl is what an operator changes the cluster with by hand (drift), and what the
	// admin and the users sign in with.
	kubectl string
	// dex is the hub's Dex (its image's binary, and another Dex on loopback);
	// kubelogin is kubectl's oidc-login plugin, found by kubectl on PATH.
	dex, kubelogin string
	// kcpServers are the kcp servers built from the kcp source, by name: kcp and
	// kcp-front-proxy (kcpflags_test.go runs the operator's command lines through them).
	kcpServers map[string]string
	// The real node: its servers, and what its images hold besides kcp and the operator.
	node             testenv.NodeBinaries
	coredns, busybox string
	etcdImage        [3]string // etcd, etcdctl and etcdutl at the etcd image's version
}

// findBinaries looks every executable up on PATH. A missing one fails the test: an e2e
// run that silently does nothing would read as a pass.
func findBinaries(t *testing.T) binaries {
	t.Helper()
	var exe testenv.Executables
	find := func(name string) string { return exe.Find(name, "") }
	b := binaries{
		kubeAPIServer:         find("kube-apiserver"),
		kubeControllerManager: find("kube-controller-manager"),
		kubeScheduler:         find("kube-scheduler"),
		etcd:                  find("etcd"),
		kwok:                  find("kwok"),
		pulumi:                find("pulumi"),
		langhost:              find("pulumi-language-go"),
		provider:              find("pulumi-resource-kubernetes"),
		kcpOperator:           find("kcp-operator"),
		certManager:           find("cert-manager-controller"),
		certManagerImages:     map[testenv.CertManagerComponent]string{},
		envoyGateway:          find("envoy-gateway"),
		helm:                  find("helm"),
		kubectl:               find("kubectl"),
		dex:                   find("dex"),
		kubelogin:             find("kubectl-oidc_login"),
		kcpServers:            map[string]string{"kcp": find("kcp"), "kcp-front-proxy": find("kcp-front-proxy")},
		node:                  testenv.FindNodeBinaries(&exe),
		coredns:               find("coredns"),
		busybox:               find("busybox"),
		etcdImage:             testenv.EtcdImageBinaries(t, &exe),
	}
	for _, c := range testenv.CertManagerComponents {
		b.certManagerImages[c] = find(c.Binary())
	}
	exe.Require(t, "the e2e test", "Build them and run the test with hack/e2e.sh "+
		"(or: eval \"$(hack/build-tools.sh env kube etcd node kwok pulumi provider kcp-operator cert-manager envoy-gateway helm kcp coredns)\")", envSkip)
	return b
}

// pulumiCLI runs the Pulumi CLI for the Automation API the way auto's own command does
// (non-interactive, PULUMI_AUTOMATION_API=true, SIGINT when the context ends, like a
// Ctrl-C), but in a process group of its own with a parent-death signal, and with a
// longer grace period after the interrupt, so that a graceful cancellation can finish.
// Whatever is still running when the test ends (the CLI and the plugins it started, in
// their own process groups) is killed by the cleanup.
type pulumiCLI struct {
	auto.PulumiCommand // Version() of the CLI on PATH
	bin                string
	logDir             string

	mu      sync.Mutex
	running map[*exec.Cmd]bool
	n       int
}

func newPulumiCLI(t *testing.T, bin, logDir string) *pulumiCLI {
	t.Helper()
	inner, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{SkipVersionCheck: true})
	if err != nil {
		t.Fatalf("pulumi version: %v", err)
	}
	c := &pulumiCLI{PulumiCommand: inner, bin: bin, logDir: logDir, running: map[*exec.Cmd]bool{}}
	t.Cleanup(c.killAll)
	return c
}

// interruptGrace is how long an interrupted CLI may take to finish cancelling gracefully
// before its process group is killed.
const interruptGrace = 90 * time.Second

func (c *pulumiCLI) Run(ctx context.Context, workdir string, stdin io.Reader,
	additionalOutput []io.Writer, additionalErrorOutput []io.Writer, additionalEnv []string, args ...string,
) (string, string, int, error) {
	if !containsArg(args, "--non-interactive") {
		args = append([]string{"--non-interactive"}, args...)
	}
	c.mu.Lock()
	c.n++
	logPath := filepath.Join(c.logDir, fmt.Sprintf("pulumi-%03d-%s.log", c.n, firstWord(args)))
	c.mu.Unlock()
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", "", -1, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "$ pulumi %s\n", strings.Join(args, " "))

	cmd := exec.Command(c.bin, args...)
	cmd.Dir = workdir
	cmd.Env = append(append(os.Environ(), additionalEnv...), "PULUMI_AUTOMATION_API=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout = io.MultiWriter(append(additionalOutput, &stdout, logFile)...)
	cmd.Stderr = io.MultiWriter(append(additionalErrorOutput, &stderr, logFile)...)
	cmd.Stdin = stdin
	testenv.SetProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return "", "", -1, err
	}
	c.mu.Lock()
	c.running[cmd] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.running, cmd)
		c.mu.Unlock()
	}()

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-waited:
	case <-ctx.Done():
		// Ctrl-C: the CLI cancels gracefully (it lets running steps finish).
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case runErr = <-waited:
		case <-time.After(interruptGrace):
			testenv.KillTree(cmd)
			runErr = <-waited
		}
	}
	// The provider plugin is in the CLI's group; nothing of it may outlive the command.
	testenv.KillGroup(cmd)
	code := -1
	var exitErr *exec.ExitError
	if runErr == nil {
		code = 0
	} else if errors.As(runErr, &exitErr) {
		code = exitErr.ExitCode()
	}
	return stdout.String(), stderr.String(), code, runErr
}

// killAll kills every running command with everything it started (kill -9).
func (c *pulumiCLI) killAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cmd := range c.running {
		testenv.KillTree(cmd)
	}
}

func containsArg(args []string, arg string) bool {
	for _, a := range args {
		if a == arg {
			return true
		}
	}
	return false
}

func firstWord(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return "cmd"
}

// goBuild builds a package of the repository in the background; wait returns the
// binary, or the build's error with its output.
func goBuild(ctx context.Context, root, pkg, out string) (wait func() (string, error)) {
	build := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	build.Dir = root
	var output bytes.Buffer
	build.Stdout, build.Stderr = &output, &output
	done := make(chan error, 1)
	go func() { done <- build.Run() }()
	var once sync.Once
	var err error
	return func() (string, error) {
		once.Do(func() {
			if err = <-done; err != nil {
				err = fmt.Errorf("go build %s: %v\n%s", pkg, err, output.String())
			}
		})
		return out, err
	}
}

// fakeGCS is fake-gcs-server, the bucket of the restore step: hack/build-tools.sh
// fakegcs builds it, or waits for the build .ci/run starts beside the tests (the step
// comes late in the run), as tests/snapshots finds it.
func fakeGCS(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "build-tools.sh"), "fakegcs")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/build-tools.sh fakegcs: %v\n%s", err, stderr.String())
	}
	return filepath.Join(strings.TrimSpace(string(out)), "fake-gcs-server"), nil
}
