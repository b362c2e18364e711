package config

import (
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Where the hub reads its credential, and for how long it holds: the rules hub-namespace,
// hub-secret-name, hub-secret-key, hub-validity, remint-generation and cron (the copy's
// schedule).

const minValidity = time.Hour

func (c *Config) validateHub(errs *Errors) {
	h := c.Hub
	if kubeName(errs, ruleHubNamespace, "hub.namespace", h.Namespace, validation.IsDNS1123Label) &&
		(h.Namespace == "default" || strings.HasPrefix(h.Namespace, "kube-")) {
		errs.add(ruleHubNamespace, "hub.namespace", h.Namespace)
	}
	kubeName(errs, ruleHubSecretName, "hub.secretName", h.SecretName, validation.IsDNS1123Subdomain)
	if h.SecretKey != HubSecretKey {
		errs.add(ruleHubSecretKey, "hub.secretKey", h.SecretKey)
	}
	if d, err := time.ParseDuration(h.KubeconfigValidity); err != nil || d < minValidity {
		errs.add(ruleHubValidity, "hub.kubeconfigValidity", h.KubeconfigValidity)
	}
	if h.RemintGeneration < 0 {
		errs.add(ruleRemintGeneration, "hub.remintGeneration", strconv.Itoa(h.RemintGeneration))
	}
	checkCronSchedule(errs, "hub.copySchedule", h.CopySchedule)
}
