package config

import (
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// etcd: the rules etcd-members, etcd-volume-size and storage-class.

func (c *Config) validateEtcd(errs *Errors) {
	e := c.Etcd
	if !validMembers(e.Members) {
		errs.add(ruleEtcdMembers, "etcd.members", strconv.Itoa(e.Members))
	}
	// What the API server asks of a PersistentVolumeClaim's storage request: a quantity
	// greater than zero (storage is not one of the resources that must be whole numbers).
	switch size, err := resource.ParseQuantity(e.VolumeSize); {
	case err != nil:
		errs.addf(ruleEtcdVolumeSize, "etcd.volumeSize", e.VolumeSize, "%s: %v", ruleEtcdVolumeSize.Refuses, err)
	case size.Sign() <= 0:
		errs.addf(ruleEtcdVolumeSize, "etcd.volumeSize", e.VolumeSize, "%s: must be greater than zero", ruleEtcdVolumeSize.Refuses)
	}
	kubeName(errs, ruleStorageClass, "etcd.storageClass", e.StorageClass, validation.IsDNS1123Subdomain)
}

// validMembers reports whether n is an etcd member count the program runs.
func validMembers(n int) bool { return slices.Contains([]int{1, 3, 5}, n) }
