package config

import "strings"

// The stack config's validation, one file per part of the rules table in
// docs/configuration.md ("What the program refuses"), in its order: validate_versions.go,
// validate_charts.go, validate_kcp.go, validate_oidc.go, validate_etcd.go,
// validate_network.go, validate_hub.go, validate_kind.go and validate_gke.go; the
// generated names' collisions are collisions.go's. The rules themselves, with the text
// each refusal quotes, are rules.go's. A limit a rule quotes is a constant, so that
// rules.go initializes the table in its own order.

// Validate checks every rule at once and returns all violations as Errors.
func (c *Config) Validate() error { return c.validate().orNil() }

func (c *Config) validate() Errors {
	var errs Errors
	c.validatePlatform(&errs)
	c.validateVersions(&errs)
	c.validateOperator(&errs)
	c.validateKcp(&errs)
	c.validateOIDC(&errs)
	c.validateKcpResources(&errs)
	c.validateEtcd(&errs)
	c.validateNetwork(&errs)
	c.validateLoadBalancer(&errs)
	c.validateHub(&errs)
	switch c.Platform {
	case PlatformKind:
		c.validateKind(&errs)
	case PlatformGKE:
		c.validateGKE(&errs)
	}
	c.validateGeneratedNames(&errs)
	return errs
}

func (c *Config) validatePlatform(errs *Errors) {
	switch c.Platform {
	case PlatformKind:
		if c.GKE != nil {
			errs.addf(ruleOtherPlatformSection, "gke", "(set)", "belongs to the gke platform; this stack's platform is kind")
		}
	case PlatformGKE:
		if c.Kind != nil {
			c.refuseKindSectionOnGKE(errs)
		}
	default:
		errs.addf(rulePlatform, "platform", string(c.Platform), "must be kind or gke")
	}
}

// refuseKindSectionOnGKE refuses the kind section of a gke stack. kind.issuerClusterIP
// is refused with a reason of its own: the issuer is there on both platforms, and only
// on kind does the program give it a name inside the cluster.
func (c *Config) refuseKindSectionOnGKE(errs *Errors) {
	issuerIP := c.given[issuerClusterIPKey]
	if issuerIP {
		errs.addf(ruleIssuerClusterIPGKE, issuerClusterIPKey, c.Kind.IssuerClusterIP, "%s; remove it", issuerClusterIPGKERule)
	}
	others := !issuerIP
	for key := range c.given {
		if strings.HasPrefix(key, "kind.") && key != issuerClusterIPKey {
			others = true
		}
	}
	if others {
		errs.addf(ruleOtherPlatformSection, "kind", "(set)", "belongs to the kind platform; this stack's platform is gke")
	}
}

// kubeName refuses value at key for rule unless validate, one of Kubernetes's own name
// checks (k8s.io/apimachinery/pkg/util/validation), takes it, with the reasons the API
// server would give. It reports whether value passed.
func kubeName(errs *Errors, rule *Rule, key, value string, validate func(string) []string) bool {
	reasons := validate(value)
	if len(reasons) > 0 {
		errs.addf(rule, key, value, "%s: %s", rule.Refuses, strings.Join(reasons, "; "))
	}
	return len(reasons) == 0
}
