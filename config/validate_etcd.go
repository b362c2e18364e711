package config

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// etcd: the rules etcd-members, etcd-volume-size, storage-class and cron (the
// defragmentation's schedule).

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
	checkCronSchedule(errs, "etcd.defragSchedule", e.DefragSchedule)
}

// checkCronSchedule refuses a CronJob schedule that the API server or the CronJob
// controller would not run. A schedule is parsed by cron.ParseStandard, in the API
// server's validation and in the CronJob controller: five fields (names such as MON or
// JAN, ranges, steps and ? included) or a descriptor such as @hourly, @daily or @every
// 6h, all of which the controller runs. As the API server does for a new CronJob, a TZ=
// or CRON_TZ= prefix is refused: spec.timeZone sets the zone. A schedule that parses but
// names no date (0 0 30 2 *) is refused too: the API server takes it, but the controller
// never starts a Job for it, and the job would silently stop.
func checkCronSchedule(errs *Errors, key, value string) {
	switch schedule, err := cron.ParseStandard(value); {
	case err != nil:
		errs.addf(ruleCron, key, value, "%s: %v", ruleCron.Refuses, err)
	case strings.Contains(value, "TZ"):
		errs.addf(ruleCron, key, value, "%s: a time zone in the schedule is refused by the API server (a CronJob sets it in spec.timeZone)", ruleCron.Refuses)
	case schedule.Next(time.Now()).IsZero():
		errs.addf(ruleCron, key, value, "%s: it names no date that exists, so the CronJob would never run", ruleCron.Refuses)
	}
}

// CopyPeriod is the longest wait between two runs of the hub's copy
// (hub.copySchedule), read from its next runs after now; 0 for a schedule that does not
// parse (the cron rule refuses it).
func (h Hub) CopyPeriod(now time.Time) time.Duration {
	schedule, err := cron.ParseStandard(h.CopySchedule)
	if err != nil {
		return 0
	}
	var longest time.Duration
	at := schedule.Next(now)
	// A day of runs covers every schedule of minutes and hours; a daily or rarer one is
	// read from its next runs.
	for i := 0; i < 1500 && !at.IsZero() && (at.Sub(now) < 24*time.Hour || i < 3); i++ {
		next := schedule.Next(at)
		if next.IsZero() {
			break
		}
		longest = max(longest, next.Sub(at))
		at = next
	}
	return longest
}

// validMembers reports whether n is an etcd member count the program runs.
func validMembers(n int) bool { return slices.Contains([]int{1, 3, 5}, n) }
