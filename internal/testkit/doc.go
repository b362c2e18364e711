// Package testkit is the room of the tests' support: what more than one test package
// uses and no part of the program may link. Its packages are normal packages so that the
// tests of any directory can import them; Go's internal rule would let the program import
// them too, so tests/testkit_test.go checks that nothing but _test.go files and testkit
// itself does, and that no command (cmd/..., main.go) depends on it.
//
//   - pki: the one test PKI: a CA (self-signed or an intermediate) and the server and
//     client certificates it issues, the PEM files and bundles.
//   - verifytest: the fakes verify's checks and the admin tools are tested against: a
//     healthy fake cluster, a scripted DNS probe and provider probe, a TLS edge, a fake
//     kcp behind the owned Services and a fake kubelet's port-forward.
//   - testenv: what the tests that run real servers share: etcd and kube-apiserver,
//     server processes, executables, the repository and ../shared, upstream CRDs, the
//     add-ons' charts and their mirrors, Dex, the real node and its images,
//     fake-gcs-server.
//   - planjobs: the gke plan's etcd CronJobs as one-off Jobs (tests/snapshots, tests/e2e).
//   - pause: the sandbox command of the real node's pods (testenv.BuildPause builds it).
//
// Every file of every testkit package, with what it holds (TestTheDocListsEveryFile
// keeps this list and the directory the same):
//
//	doc.go                            this list
//	doc_test.go                       the test that this list names every file, and no other
//	pause/main.go                     the pause command: holds a pod's namespaces, reaps orphans
//	pki/pki.go                        CA, Cert and Options: NewCA, Intermediate, ServerCert, ClientCert, Bundle, the Must forms
//	pki/pki_test.go                   the PKI's certificates verify as they should; validity options; file modes
//	planjobs/planjobs.go              the gke plan's snapshot and drill CronJobs as one-off Jobs with an emulator's environment
//	planjobs/planjobs_test.go         the Jobs are the CronJobs' templates, changed only as documented
//	testenv/apiserver.go              StartAPIServer: etcd and kube-apiserver on loopback or a node's gateway; RESTConfig, WriteKubeconfig
//	testenv/charts.go                 cert-manager's and Envoy Gateway's charts from their upstream modules (ModuleDir)
//	testenv/charts_test.go            cert-manager's Chart.yaml is filled in as its release does
//	testenv/chartservers.go           the chart mirrors over https on loopback: ServeChartRepository, ServeChartRegistry, ServeKindCharts
//	testenv/controlplanefiles.go      ControlPlaneFiles: the API server's CA, serving, kubelet-client and service-account files
//	testenv/crds.go                   LoadCRDs, ReadDocuments, CRDKind, WaitEstablished: the upstream CRDs
//	testenv/crds_test.go              LoadCRDs reads in path order, skips empty documents, refuses what is not a CRD
//	testenv/dex.go                    DexConfig, StartDex, DexAt: Dex as the hub's identity provider, its password grant and tokens
//	testenv/dex_test.go               DexConfig renders Dex's fields and hashes the passwords
//	testenv/doc.go                    testenv's package documentation
//	testenv/executables.go            Executables: finds the programs a test runs and names every miss
//	testenv/gcloudimage.go            GcloudImage: the google-cloud-cli image the snapshot jobs run, from this machine's SDK
//	testenv/gcloudimage_test.go       the gcloud image keeps what gcloud storage uses, with the tools' libraries
//	testenv/gcs.go                    GCSEmulator: fake-gcs-server standing in for Cloud Storage
//	testenv/helm.go                   Helm: the Helm CLI with homes of its own; chart metadata
//	testenv/hold.go                   RunContext and Hold: a long test's context and its hold file
//	testenv/images.go                 Image, WriteImage(s), ReadImageArchive: the images the real node runs, built here
//	testenv/kerneltunables.go         the kubelet's kernel-wide sysctls, recorded by the first node of any test, put back by the last
//	testenv/kerneltunables_test.go    they go back to what was there before the first holder, also when one was killed
//	testenv/kubeadm.go                kubeadm's CoreDNS Deployment, RBAC and kube-dns Service, as a kind cluster has them
//	testenv/leftovers.go              the node lock's record of what a run made, and the sweep of a killed run's leftovers
//	testenv/machine.go                RunOnOwnMachine and MachineScoped: a test binary run again in a network namespace of its own
//	testenv/machine_test.go           a machine of its own has only its loopback; its failures are named
//	testenv/mountinfo.go              a process's mount table (/proc/<pid>/mountinfo)
//	testenv/mountinfo_test.go         the mount table's points, options and propagation are read
//	testenv/netns.go                  named network namespaces (the test hosts')
//	testenv/kubeletservice.go         the kubelet started again when it exits on its own, as kubeadm's unit does
//	testenv/kubeletservice_test.go    a kubelet that dies at start is started again, one stopped on purpose is not
//	testenv/node.go                   StartNode: containerd, kubelet and kube-proxy as a real node
//	testenv/nodeimages.go             BuildPause, BuildProviderProbe and the node's images of them and of CoreDNS
//	testenv/nodeimages_test.go        the add-ons', Dex's and the provider probe's images are laid out as upstream builds them
//	testenv/nodenet.go                SetUpNodeNetwork and LockTheNode: the real node's pod network and its lock
//	testenv/operatorchart.go          OperatorChart: the kcp-operator chart at the pinned version, from the upstream templates
//	testenv/parallel.go               twoAtATime: work two at a time, for two cores
//	testenv/proc_linux.go             process groups, parent-death signal and process trees on Linux
//	testenv/proc_other.go             the same elsewhere: kill the process alone
//	testenv/process.go                Process, StartProcess, LaunchProcess, WaitFor: servers in their own process groups with logs
//	testenv/process_linux_test.go     Stop ends the process group, KillTree the children, WaitFor reports an exit with the log
//	testenv/program.go                CopyProgram: the files the language host's build of main.go reads, copied
//	testenv/proxyplacement.go         InstallEnvoyProxyPlacement: a MutatingAdmissionPolicy that places the Envoy proxies
//	testenv/repo.go                   RepoRoot, CRDsDir, ThirdpartyDir, SkipIfShortOrDisabled
//	testenv/repo_test.go              the repository root, the ../shared directories and Executables' misses
//	testenv/syncbuffer.go             SyncBuffer: a buffer goroutines write while the test reads
//	testenv/testhost.go               AddTestHost: a network namespace of the test's own on the pod network
//	verifytest/kcp.go                 Kcp: a fake kcp (front proxy and shards) behind the owned Services
//	verifytest/kubelet.go             Kubelet: a fake kubelet's pods/portforward over SPDY
//	verifytest/providerprobe.go       ProbeRunner: the provider probe's report as a healthy stack gives it
//	verifytest/verifytest.go          the healthy fake cluster, its CA, hub kubeconfigs, the DNS probe and the TLS edge
package testkit
