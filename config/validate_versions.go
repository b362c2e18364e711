package config

import (
	"fmt"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

// The pinned versions: the rules pinned-version and operator-pair.

func (c *Config) validateVersions(errs *Errors) {
	v := c.Versions
	pinned := func(key, value string, isPinned func(string) bool, example string) {
		if !isPinned(value) {
			errs.addf(rulePinnedVersion, key, value, "must be a pinned release such as %s (not empty, not latest, not a floating tag such as v1.2, no +build suffix)", example)
		}
	}
	pinned("versions.kcp", v.Kcp, pinnedTag, DefaultKcpVersion+"; every kcp image (root shard, its proxy, shards, front proxy) uses it")
	pinned("versions.operatorChart", v.OperatorChart, pinnedChartVersion, DefaultOperatorChartVersion+", without a leading v")
	pinned("versions.operatorImage", v.OperatorImage, pinnedTag, DefaultOperatorImageTag)
	pinned("versions.etcd", v.Etcd, pinnedTag, DefaultEtcdVersion)
	pinned("versions.certManager", v.CertManager, pinnedTag, DefaultCertManagerVersion)
	pinned("versions.envoyGateway", v.EnvoyGateway, pinnedTag, DefaultEnvoyGatewayVersion)
	if want, known := KnownOperatorPairs[v.OperatorChart]; pinnedChartVersion(v.OperatorChart) && pinnedTag(v.OperatorImage) && (!known || want != v.OperatorImage) {
		errs.addf(ruleOperatorPair, "versions.operatorImage", v.OperatorImage, "%s", fmt.Sprintf(
			"is not a known pair with kcp-operator chart %s (known pairs: %s); the chart's CRDs must match the operator, so they move together",
			v.OperatorChart, knownPairs()))
	}
}

func knownPairs() string {
	pairs := make([]string, 0, len(KnownOperatorPairs))
	for chart, image := range KnownOperatorPairs {
		pairs = append(pairs, "chart "+chart+" with image "+image)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ", ")
}

// pinnedTag reports whether v is a pinned image or chart version: a full semantic
// version, pre-releases included (v0.34.0-rc.1 is as fixed as v0.34.0). semver also
// takes the shorthands v1 and v1.2, which float over releases, and +build metadata,
// which an image tag cannot carry; Canonical rewrites both, so a version equal to its
// canonical form is neither.
func pinnedTag(v string) bool { return semver.IsValid(v) && semver.Canonical(v) == v }

// pinnedChartVersion reports whether v is a pinned kcp-operator chart version: the
// chart's versions have no leading v (its repository index lists 0.7.10), and
// KnownOperatorPairs is keyed by that spelling.
func pinnedChartVersion(v string) bool { return !strings.HasPrefix(v, "v") && pinnedTag("v"+v) }
