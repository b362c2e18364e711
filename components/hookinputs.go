package components

import "github.com/pulumi/pulumi/sdk/v3/go/common/resource"

// A resource hook receives its resource's inputs as a property map, in which a value may
// sit inside a secret or a known output. The hooks (the Helm record repair and the kcp
// rollout waits) read the names they act on through these two.

// stringInput reads a string input of a hook's property map, through secrets and
// output values.
func stringInput(props resource.PropertyMap, key string) string {
	v, ok := props[resource.PropertyKey(key)]
	for ok {
		switch {
		case v.IsString():
			return v.StringValue()
		case v.IsSecret():
			v = v.SecretValue().Element
		case v.IsOutput() && v.OutputValue().Known:
			v = v.OutputValue().Element
		default:
			ok = false
		}
	}
	return ""
}

// nestedStringInput reads a string below nested objects of a hook's property map.
func nestedStringInput(props resource.PropertyMap, path ...string) string {
	for _, key := range path[:len(path)-1] {
		v, ok := props[resource.PropertyKey(key)]
		for ok && v.IsOutput() && v.OutputValue().Known {
			v = v.OutputValue().Element
		}
		if !ok || !v.IsObject() {
			return ""
		}
		props = v.ObjectValue()
	}
	return stringInput(props, path[len(path)-1])
}
