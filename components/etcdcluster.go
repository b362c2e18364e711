package components

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	networkingv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/networking/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"

	"github.com/railgrid/railgrid-kcp/naming"
)

// EtcdClusterArgs describes one shard's etcd.
type EtcdClusterArgs struct {
	Shard      string // the kcp shard this etcd serves ("root", "alpha")
	Members    int
	Image      string // pinned official etcd image
	VolumeSize string
	Placement  EtcdPlacement
	Namespace  *corev1.Namespace
	Defrag     EtcdDefrag
}

// EtcdCluster is a shard's own etcd: a StatefulSet of members spread over zones, the
// Services that name them, a disruption budget, a network policy and its scheduled
// defragmentation.
type EtcdCluster struct {
	pulumi.ResourceState

	Shard string
	// Endpoints are the member client URLs the shard lists in spec.etcd.endpoints.
	Endpoints   []string
	StatefulSet *appsv1.StatefulSet

	EndpointsOutput pulumi.StringArrayOutput `pulumi:"endpoints"`
}

// NewEtcdCluster declares the etcd of one shard in the etcd namespace.
func NewEtcdCluster(ctx *pulumi.Context, name string, args *EtcdClusterArgs, opts ...pulumi.ResourceOption) (*EtcdCluster, error) {
	if args == nil || args.Shard == "" || args.Namespace == nil || args.Defrag.Schedule == "" || args.Defrag.Image == "" {
		return nil, errors.New("EtcdCluster: Shard, Namespace and Defrag are required")
	}
	c := &EtcdCluster{Shard: args.Shard}
	if err := ctx.RegisterComponentResource("railgrid:kcp:EtcdCluster", name, c, opts...); err != nil {
		return nil, err
	}
	for i := 0; i < args.Members; i++ {
		c.Endpoints = append(c.Endpoints, naming.EtcdClientURL(args.Shard, i))
	}
	m := etcdMeta{
		labels:    pulumi.StringMap{"app": pulumi.String(naming.EtcdName(args.Shard)), "app.kubernetes.io/name": pulumi.String("etcd"), naming.ShardLabel: pulumi.String(args.Shard)},
		selector:  pulumi.StringMap{"app": pulumi.String(naming.EtcdName(args.Shard))},
		namespace: args.Namespace.Metadata.Name().Elem(),
	}
	parent := pulumi.Parent(c)
	services, err := newEtcdServices(ctx, name, args.Shard, m, parent)
	if err != nil {
		return nil, err
	}
	if _, err := newEtcdNetworkPolicy(ctx, name, args.Shard, m, parent); err != nil {
		return nil, err
	}
	// A budget that keeps quorum through voluntary disruptions (node upgrades, drains).
	if _, err := policyv1.NewPodDisruptionBudget(ctx, name+"-pdb", &policyv1.PodDisruptionBudgetArgs{
		Metadata: m.objectMeta(naming.EtcdName(args.Shard)),
		Spec: &policyv1.PodDisruptionBudgetSpecArgs{
			MinAvailable: pulumi.Int(args.Members/2 + 1),
			Selector:     &metav1.LabelSelectorArgs{MatchLabels: m.selector},
		},
	}, parent); err != nil {
		return nil, err
	}
	deps := append(services, args.Placement.DependsOn...)
	sts, err := appsv1.NewStatefulSet(ctx, name, &appsv1.StatefulSetArgs{
		Metadata: m.objectMeta(naming.EtcdName(args.Shard)),
		Spec:     etcdStatefulSetSpec(args, m),
	}, parent, pulumi.DependsOn(deps), pulumi.Timeouts(&pulumi.CustomTimeouts{Create: "20m", Update: "20m"}))
	if err != nil {
		return nil, err
	}
	c.StatefulSet = sts
	if _, err := newEtcdDefragCronJob(ctx, name, args, m, parent, pulumi.DependsOn([]pulumi.Resource{sts})); err != nil {
		return nil, err
	}
	c.EndpointsOutput = pulumi.ToStringArray(c.Endpoints).ToStringArrayOutput()
	if err := ctx.RegisterResourceOutputs(c, pulumi.Map{"endpoints": c.EndpointsOutput}); err != nil {
		return nil, err
	}
	return c, nil
}

// etcdMeta is what every object of one shard's etcd carries: its labels, the selector
// of its members, and its namespace.
type etcdMeta struct {
	labels, selector pulumi.StringMap
	namespace        pulumi.StringOutput
}

func (m etcdMeta) objectMeta(name string) *metav1.ObjectMetaArgs {
	return &metav1.ObjectMetaArgs{Name: pulumi.String(name), Namespace: m.namespace, Labels: m.labels}
}

// newEtcdServices declares the headless Service that names the members and the client
// Service. publishNotReadyAddresses: members must find each other before any is ready.
func newEtcdServices(ctx *pulumi.Context, name, shard string, m etcdMeta, parent pulumi.ResourceOption) ([]pulumi.Resource, error) {
	headless, err := corev1.NewService(ctx, name+"-headless", &corev1.ServiceArgs{
		Metadata: m.objectMeta(naming.EtcdHeadlessService(shard)),
		Spec: &corev1.ServiceSpecArgs{
			ClusterIP:                pulumi.String("None"),
			PublishNotReadyAddresses: pulumi.Bool(true),
			Selector:                 m.selector,
			Ports:                    etcdPorts(),
		},
	}, parent)
	if err != nil {
		return nil, err
	}
	client, err := corev1.NewService(ctx, name+"-client", &corev1.ServiceArgs{
		Metadata: m.objectMeta(naming.EtcdName(shard)),
		Spec: &corev1.ServiceSpecArgs{
			Selector: m.selector,
			Ports:    corev1.ServicePortArray{&corev1.ServicePortArgs{Name: pulumi.String("etcd-client"), Port: pulumi.Int(naming.EtcdClientPort)}},
		},
	}, parent)
	if err != nil {
		return nil, err
	}
	return []pulumi.Resource{headless, client}, nil
}

// etcdStatefulSetSpec is the members' StatefulSet: started all at once, each with its
// own volume claim of the platform's StorageClass.
func etcdStatefulSetSpec(args *EtcdClusterArgs, m etcdMeta) *appsv1.StatefulSetSpecArgs {
	return &appsv1.StatefulSetSpecArgs{
		ServiceName: pulumi.String(naming.EtcdHeadlessService(args.Shard)),
		Replicas:    pulumi.Int(args.Members),
		// Parallel: a new cluster has no quorum until every member has started.
		PodManagementPolicy: pulumi.String("Parallel"),
		Selector:            &metav1.LabelSelectorArgs{MatchLabels: m.selector},
		// The volumes outlive the StatefulSet: deleting or renaming it keeps the data.
		PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicyArgs{
			WhenDeleted: pulumi.String("Retain"),
			WhenScaled:  pulumi.String("Retain"),
		},
		Template: &corev1.PodTemplateSpecArgs{
			Metadata: &metav1.ObjectMetaArgs{Labels: m.labels},
			Spec:     etcdPodSpec(args, m.selector),
		},
		VolumeClaimTemplates: corev1.PersistentVolumeClaimTypeArray{&corev1.PersistentVolumeClaimTypeArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.EtcdDataClaimTemplate), Labels: m.labels},
			Spec: &corev1.PersistentVolumeClaimSpecArgs{
				AccessModes:      pulumi.StringArray{pulumi.String("ReadWriteOnce")},
				StorageClassName: pulumi.String(args.Placement.StorageClassName),
				Resources: &corev1.VolumeResourceRequirementsArgs{
					Requests: pulumi.StringMap{"storage": pulumi.String(args.VolumeSize)},
				},
			},
		}},
	}
}

func etcdPorts() corev1.ServicePortArray {
	return corev1.ServicePortArray{
		&corev1.ServicePortArgs{Name: pulumi.String("etcd-client"), Port: pulumi.Int(naming.EtcdClientPort)},
		&corev1.ServicePortArgs{Name: pulumi.String("etcd-server"), Port: pulumi.Int(naming.EtcdPeerPort)},
		&corev1.ServicePortArgs{Name: pulumi.String("etcd-metrics"), Port: pulumi.Int(naming.EtcdMetricsPort)},
	}
}

func etcdPodSpec(args *EtcdClusterArgs, selector pulumi.StringMap) *corev1.PodSpecArgs {
	shard := args.Shard
	memberURL := func(port int) string {
		return fmt.Sprintf("http://$(HOSTNAME).%s:%d", naming.EtcdHeadlessHost(shard), port)
	}
	spec := &corev1.PodSpecArgs{
		NodeSelector: pulumi.ToStringMap(args.Placement.NodeSelector),
		Tolerations:  args.Placement.Tolerations,
		// One member per node: losing a node must cost at most one member.
		Affinity: &corev1.AffinityArgs{PodAntiAffinity: &corev1.PodAntiAffinityArgs{
			RequiredDuringSchedulingIgnoredDuringExecution: corev1.PodAffinityTermArray{&corev1.PodAffinityTermArgs{
				TopologyKey:   pulumi.String("kubernetes.io/hostname"),
				LabelSelector: &metav1.LabelSelectorArgs{MatchLabels: selector},
			}},
		}},
		TerminationGracePeriodSeconds: pulumi.Int(30),
		SecurityContext:               restrictedPodSecurity(),
		Containers: corev1.ContainerArray{&corev1.ContainerArgs{
			Name:            pulumi.String("etcd"),
			Image:           pulumi.String(args.Image),
			SecurityContext: restrictedContainerSecurity(),
			// The official image is distroless: exec form only, $(VAR) expanded by the kubelet.
			Command: pulumi.StringArray{pulumi.String("/usr/local/bin/etcd")},
			Args: pulumi.ToStringArray([]string{
				"--name=$(HOSTNAME)",
				"--data-dir=" + naming.EtcdDataDir,
				fmt.Sprintf("--listen-client-urls=http://0.0.0.0:%d", naming.EtcdClientPort),
				fmt.Sprintf("--listen-peer-urls=http://0.0.0.0:%d", naming.EtcdPeerPort),
				fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", naming.EtcdMetricsPort),
				"--advertise-client-urls=" + memberURL(naming.EtcdClientPort),
				"--initial-advertise-peer-urls=" + memberURL(naming.EtcdPeerPort),
				"--initial-cluster=" + naming.EtcdInitialCluster(shard, args.Members),
				"--initial-cluster-state=new",
				"--initial-cluster-token=" + naming.EtcdName(shard),
				"--auto-compaction-mode=periodic",
				"--auto-compaction-retention=1h",
				"--quota-backend-bytes=8589934592",
			}),
			Env: corev1.EnvVarArray{&corev1.EnvVarArgs{
				Name:      pulumi.String("HOSTNAME"),
				ValueFrom: &corev1.EnvVarSourceArgs{FieldRef: &corev1.ObjectFieldSelectorArgs{FieldPath: pulumi.String("metadata.name")}},
			}},
			Ports: corev1.ContainerPortArray{
				&corev1.ContainerPortArgs{Name: pulumi.String("etcd-client"), ContainerPort: pulumi.Int(naming.EtcdClientPort)},
				&corev1.ContainerPortArgs{Name: pulumi.String("etcd-server"), ContainerPort: pulumi.Int(naming.EtcdPeerPort)},
				&corev1.ContainerPortArgs{Name: pulumi.String("etcd-metrics"), ContainerPort: pulumi.Int(naming.EtcdMetricsPort)},
			},
			ReadinessProbe: httpProbe("/readyz", 5),
			LivenessProbe:  httpProbe("/livez", 30),
			Resources:      containerResources("250m", "512Mi", "2Gi"),
			// etcd writes only its data directory, on this volume: the root filesystem is read-only.
			VolumeMounts: corev1.VolumeMountArray{&corev1.VolumeMountArgs{Name: pulumi.String(naming.EtcdDataClaimTemplate), MountPath: pulumi.String(naming.EtcdDataMount)}},
		}},
	}
	if args.Members >= 3 {
		// minDomains: when the pool has nodes in fewer zones than members, the scheduler
		// would pack members into the zones it sees and zonal volumes would pin them
		// there for good. With minDomains the extra members stay Pending until the
		// autoscaler adds a node in an empty zone.
		spec.TopologySpreadConstraints = corev1.TopologySpreadConstraintArray{&corev1.TopologySpreadConstraintArgs{
			MaxSkew:           pulumi.Int(1),
			TopologyKey:       pulumi.String("topology.kubernetes.io/zone"),
			WhenUnsatisfiable: pulumi.String("DoNotSchedule"),
			MinDomains:        pulumi.Int(args.Members),
			LabelSelector:     &metav1.LabelSelectorArgs{MatchLabels: selector},
		}}
	}
	return spec
}

func httpProbe(path string, initialDelay int) *corev1.ProbeArgs {
	return &corev1.ProbeArgs{
		HttpGet:             &corev1.HTTPGetActionArgs{Path: pulumi.String(path), Port: pulumi.Int(naming.EtcdMetricsPort)},
		InitialDelaySeconds: pulumi.Int(initialDelay),
		PeriodSeconds:       pulumi.Int(10),
		FailureThreshold:    pulumi.Int(6),
	}
}

// newEtcdNetworkPolicy keeps etcd unreachable except from its own shard's kcp pods,
// the snapshot jobs and its peers.
func newEtcdNetworkPolicy(ctx *pulumi.Context, name, shard string, m etcdMeta, parent pulumi.ResourceOption) (*networkingv1.NetworkPolicy, error) {
	clientPort := networkingv1.NetworkPolicyPortArray{&networkingv1.NetworkPolicyPortArgs{Port: pulumi.Int(naming.EtcdClientPort), Protocol: pulumi.String("TCP")}}
	kcpComponent := naming.ComponentShard
	if shard == naming.RootShardName {
		kcpComponent = naming.ComponentRootShard
	}
	return networkingv1.NewNetworkPolicy(ctx, name+"-netpol", &networkingv1.NetworkPolicyArgs{
		Metadata: m.objectMeta(naming.EtcdName(shard)),
		Spec: &networkingv1.NetworkPolicySpecArgs{
			PodSelector: &metav1.LabelSelectorArgs{MatchLabels: m.selector},
			PolicyTypes: pulumi.StringArray{pulumi.String("Ingress")},
			Ingress: networkingv1.NetworkPolicyIngressRuleArray{
				// The shard's own kcp pods.
				&networkingv1.NetworkPolicyIngressRuleArgs{
					Ports: clientPort,
					From: networkingv1.NetworkPolicyPeerArray{&networkingv1.NetworkPolicyPeerArgs{
						NamespaceSelector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.StringMap{"kubernetes.io/metadata.name": pulumi.String(naming.NamespaceKcp)}},
						PodSelector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.StringMap{
							naming.LabelComponent: pulumi.String(kcpComponent),
							naming.LabelInstance:  pulumi.String(shard),
						}},
					}},
				},
				// Snapshot and restore-drill jobs in the etcd namespace.
				&networkingv1.NetworkPolicyIngressRuleArgs{
					Ports: clientPort,
					From: networkingv1.NetworkPolicyPeerArray{&networkingv1.NetworkPolicyPeerArgs{
						PodSelector: &metav1.LabelSelectorArgs{MatchLabels: pulumi.StringMap{naming.EtcdClientLabel: pulumi.String(shard)}},
					}},
				},
				// Peers of the same cluster.
				&networkingv1.NetworkPolicyIngressRuleArgs{
					Ports: networkingv1.NetworkPolicyPortArray{
						&networkingv1.NetworkPolicyPortArgs{Port: pulumi.Int(naming.EtcdClientPort), Protocol: pulumi.String("TCP")},
						&networkingv1.NetworkPolicyPortArgs{Port: pulumi.Int(naming.EtcdPeerPort), Protocol: pulumi.String("TCP")},
					},
					From: networkingv1.NetworkPolicyPeerArray{&networkingv1.NetworkPolicyPeerArgs{
						PodSelector: &metav1.LabelSelectorArgs{MatchLabels: m.selector},
					}},
				},
			},
		},
	}, parent)
}
