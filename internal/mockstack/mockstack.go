// Package mockstack runs the stack's real composition (stackconfig.LoadFrom and
// components.Deploy: what `pulumi up` runs, with the stack config given as a whole) under Pulumi's in-process mock monitor, and records every
// resource it declares: type, name, parent, dependencies, options and inputs. The unit
// tests and the offline plan (cmd/plan) are both built on it.
//
// Values that only a cloud or a cluster knows (the GKE cluster lookup, a random suffix,
// a service account's e-mail, the operator's Secret) come from deterministic fakes, and
// each recorded resource lists the outputs that were faked.
package mockstack

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"

	"github.com/railgrid/railgrid-kcp/components"
	"github.com/railgrid/railgrid-kcp/components/kcpapi"
	"github.com/railgrid/railgrid-kcp/config"
	"github.com/railgrid/railgrid-kcp/config/stackconfig"
)

// Resource is one declared (or read) resource as the mock monitor saw it.
type Resource struct {
	URN                 string
	Type                string
	Name                string
	Parent              string
	Custom              bool
	Read                bool // a read of an existing object (ID given), not a declaration
	ReadID              string
	Provider            string
	Dependencies        []string
	Protect             bool
	RetainOnDelete      bool
	DeleteBeforeReplace bool
	ReplaceOnChanges    []string
	IgnoreChanges       []string
	// AdditionalSecretOutputs are the outputs the state keeps as secrets.
	AdditionalSecretOutputs []string
	// The resource hooks bound to it, by when they run.
	BeforeCreateHooks []string
	BeforeUpdateHooks []string
	AfterCreateHooks  []string
	AfterUpdateHooks  []string
	Inputs            resource.PropertyMap
	// Faked lists the outputs that came from a fake rather than from the inputs, and
	// Outputs are all the outputs the mock gave the program.
	Faked   []string
	Outputs resource.PropertyMap
}

// Invoke is one data-source call (for example the GKE cluster lookup).
type Invoke struct {
	Token string
	Args  resource.PropertyMap
	Faked bool
}

// Recording is everything one run declared.
type Recording struct {
	Stack     string
	Resources []Resource
	Invokes   []Invoke
	// Outputs are the stack's outputs as the run computed them, by name.
	Outputs map[string]Output
}

// Output is one stack output: its value (strings, numbers, maps and lists), whether it
// is known (a preview does not know what only the cluster tells) and whether it is secret.
type Output struct {
	Value  any
	Known  bool
	Secret bool
}

// Options changes what the fakes return.
type Options struct {
	// GKEServiceCIDR is the Service range the fake GKE cluster lookup reports.
	GKEServiceCIDR string
	// DryRun runs as a preview: IDs of new resources are unknown.
	DryRun bool
	// Previous is what the stack's last up recorded (config.PreviousShardsOutput), as
	// the stack reference to itself returns it; nil for a stack that never ran.
	Previous map[string]config.ShardEndpoint
}

// DefaultGKEServiceCIDR is GKE's managed Service range.
const DefaultGKEServiceCIDR = "34.118.224.0/20"

// RunConfig runs the composition for one stack's config values ("<ns>:<key>" as the
// engine passes them; see config.ReadStackFile). A config that fails validation, or a
// GKE cluster whose Service range does not hold the fixed ClusterIPs, returns
// config.Errors with the (empty) recording.
func RunConfig(stack string, values map[string]string, opts Options) (*Recording, error) {
	if opts.GKEServiceCIDR == "" {
		opts.GKEServiceCIDR = DefaultGKEServiceCIDR
	}
	m := &mocks{stack: stack, opts: opts}
	var validationErr error
	var outputs map[string]Output
	program := func(ctx *pulumi.Context) error {
		// The whole config is given, as PULUMI_CONFIG gives it to main.go's stackconfig.Load.
		cfg, err := stackconfig.LoadFrom(ctx, values)
		if err != nil {
			validationErr = err
			return err
		}
		st, err := components.Deploy(ctx, cfg)
		if err != nil {
			return err
		}
		outputs, err = awaitOutputs(ctx, st.Outputs)
		return err
	}
	withConfig := func(info *pulumi.RunInfo) {
		info.Config = values
		info.DryRun = opts.DryRun
	}
	err := pulumi.RunErr(program, pulumi.WithMocks(config.Project, stack, m), withConfig)
	rec := &Recording{Stack: stack, Resources: m.resources, Invokes: m.invokes, Outputs: outputs}
	sort.SliceStable(rec.Resources, func(i, j int) bool { return rec.Resources[i].URN < rec.Resources[j].URN })
	if validationErr != nil {
		// The recording is returned too, so callers can check that nothing was declared.
		return rec, validationErr
	}
	if err != nil {
		return rec, err
	}
	return rec, nil
}

// awaitOutputs waits for each stack output, as the engine records it at the end of a run.
func awaitOutputs(ctx *pulumi.Context, outputs pulumi.Map) (map[string]Output, error) {
	out := map[string]Output{}
	for name, input := range outputs {
		res, err := internals.UnsafeAwaitOutput(ctx.Context(), pulumi.ToOutput(input))
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		out[name] = Output{Value: res.Value, Known: res.Known, Secret: res.Secret}
	}
	return out, nil
}

// RunStackFile runs the composition for a Pulumi.<stack>.yaml file.
func RunStackFile(stack, path string, opts Options) (*Recording, error) {
	values, err := config.ReadStackFile(path)
	if err != nil {
		return nil, err
	}
	return RunConfig(stack, values, opts)
}

type mocks struct {
	stack     string
	opts      Options
	mu        sync.Mutex
	resources []Resource
	invokes   []Invoke
	// validity of the Kubeconfig object, for the fake Secret the operator would write.
	validity time.Duration
}

func (m *mocks) rememberValidity(inputs resource.PropertyMap) {
	spec, ok := inputs["spec"]
	if !ok || !spec.IsObject() {
		return
	}
	d, err := time.ParseDuration(stringInput(spec.ObjectValue(), "validity"))
	if err != nil {
		return
	}
	m.mu.Lock()
	m.validity = d
	m.mu.Unlock()
}

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	r := Resource{Type: args.TypeToken, Name: args.Name, Custom: args.Custom, Provider: args.Provider, Inputs: args.Inputs}
	if rpc := args.RegisterRPC; rpc != nil {
		r.Parent = rpc.GetParent()
		r.Dependencies = append(r.Dependencies, rpc.GetDependencies()...)
		r.Protect = rpc.GetProtect()
		r.RetainOnDelete = rpc.GetRetainOnDelete()
		r.DeleteBeforeReplace = rpc.GetDeleteBeforeReplace()
		r.ReplaceOnChanges = rpc.GetReplaceOnChanges()
		r.IgnoreChanges = rpc.GetIgnoreChanges()
		r.AdditionalSecretOutputs = rpc.GetAdditionalSecretOutputs()
		r.BeforeCreateHooks = rpc.GetHooks().GetBeforeCreate()
		r.BeforeUpdateHooks = rpc.GetHooks().GetBeforeUpdate()
		r.AfterCreateHooks = rpc.GetHooks().GetAfterCreate()
		r.AfterUpdateHooks = rpc.GetHooks().GetAfterUpdate()
	}
	if rpc := args.ReadRPC; rpc != nil {
		r.Parent = rpc.GetParent()
		r.Dependencies = append(r.Dependencies, rpc.GetDependencies()...)
		r.Read = true
		r.ReadID = args.ID
	}
	sort.Strings(r.Dependencies)
	r.URN = string(urnOf(m.stack, r.Parent, r.Type, r.Name))

	if args.TypeToken == "kubernetes:"+kcpapi.APIVersion+":"+kcpapi.KindKubeconfig {
		m.rememberValidity(args.Inputs)
	}
	m.mu.Lock()
	validity := m.validity
	m.mu.Unlock()
	id, outputs, faked, err := fakeState(args, m.opts, validity)
	if err != nil {
		return "", nil, err
	}
	r.Faked, r.Outputs = faked, outputs
	m.mu.Lock()
	m.resources = append(m.resources, r)
	m.mu.Unlock()
	return id, outputs, nil
}

func (m *mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	out, faked, err := fakeInvoke(args, m.opts)
	m.mu.Lock()
	m.invokes = append(m.invokes, Invoke{Token: args.Token, Args: args.Args, Faked: faked})
	m.mu.Unlock()
	return out, err
}

// urnOf builds the URN the engine would give a resource: the parent's type chain, the
// resource's type and its name.
func urnOf(stack, parent, typ, name string) resource.URN {
	var parentType tokens.Type
	if parent != "" {
		if p, err := resource.ParseURN(parent); err == nil && p.Type() != "pulumi:pulumi:Stack" {
			parentType = tokens.Type(p.QualifiedType())
		}
	}
	return resource.NewURN(tokens.QName(stack), tokens.PackageName(config.Project), parentType, tokens.Type(typ), name)
}

// ByType returns the recorded resources of one type token, in URN order.
func (r *Recording) ByType(typ string) []Resource {
	var out []Resource
	for _, res := range r.Resources {
		if res.Type == typ {
			out = append(out, res)
		}
	}
	return out
}

// Find returns the resource with the given type and logical name.
func (r *Recording) Find(typ, name string) (Resource, bool) {
	for _, res := range r.Resources {
		if res.Type == typ && res.Name == name {
			return res, true
		}
	}
	return Resource{}, false
}

// KubernetesObject returns the declared (not read) Kubernetes object of a kind with the
// given metadata name, for "kubernetes:<group/version>:<Kind>" types.
func (r *Recording) KubernetesObject(kind, name string) (Resource, bool) {
	for _, res := range r.Resources {
		if res.Read || !strings.HasPrefix(res.Type, "kubernetes:") || !strings.HasSuffix(res.Type, ":"+kind) {
			continue
		}
		if MetadataName(res) == name {
			return res, true
		}
	}
	return Resource{}, false
}

// MetadataName is a Kubernetes object's metadata.name.
func MetadataName(res Resource) string {
	meta, ok := res.Inputs["metadata"]
	if !ok || !meta.IsObject() {
		return ""
	}
	name, ok := meta.ObjectValue()["name"]
	if !ok || !name.IsString() {
		return ""
	}
	return name.StringValue()
}

// DependsOnTransitively reports whether from waits for to, directly or through other
// resources (a dependency on a component covers its children).
func (r *Recording) DependsOnTransitively(from, to string) bool {
	byURN := map[string]Resource{}
	for _, res := range r.Resources {
		byURN[res.URN] = res
	}
	seen := map[string]bool{}
	var walk func(urn string) bool
	walk = func(urn string) bool {
		if seen[urn] {
			return false
		}
		seen[urn] = true
		for _, dep := range byURN[urn].Dependencies {
			if dep == to || walk(dep) {
				return true
			}
		}
		return false
	}
	return walk(from)
}

// String names a resource for messages.
func (res Resource) String() string { return fmt.Sprintf("%s %q", res.Type, res.Name) }
