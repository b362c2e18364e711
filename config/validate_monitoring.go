package config

import (
	"strconv"
	"time"
)

// How kcp, the front proxy and etcd are scraped, and when their alerts fire: the rules
// monitoring-duration, monitoring-window, monitoring-percent and monitoring-count.

// minScrapesPerWindow is how many scrapes an alert's window must span: a rate needs two
// samples, and one missed scrape is not yet a target down.
const minScrapesPerWindow = 2

func (c *Config) validateMonitoring(errs *Errors) {
	m := c.Monitoring
	a := m.Alerts
	interval, intervalOK := monitoringDuration(errs, "monitoring.scrapeInterval", m.ScrapeInterval)
	for _, w := range []struct{ key, value string }{
		{"monitoring.alerts.downFor", a.DownFor},
		{"monitoring.alerts.rateWindow", a.RateWindow},
		{"monitoring.alerts.leaderChangesWindow", a.LeaderChangesWindow},
	} {
		if d, ok := monitoringDuration(errs, w.key, w.value); ok && intervalOK && d < minScrapesPerWindow*interval {
			errs.add(ruleMonitoringWindow, w.key, w.value)
		}
	}
	monitoringDuration(errs, "monitoring.alerts.etcdFsyncLatency", a.EtcdFsyncLatency)
	monitoringDuration(errs, "monitoring.alerts.certificateExpiry", a.CertificateExpiry)
	for _, p := range []struct {
		key   string
		value int
	}{
		{"monitoring.alerts.etcdDatabaseQuotaPercent", a.EtcdDatabaseQuotaPercent},
		{"monitoring.alerts.frontProxyErrorPercent", a.FrontProxyErrorPercent},
	} {
		if p.value < 1 || p.value > 99 {
			errs.add(ruleMonitoringPercent, p.key, strconv.Itoa(p.value))
		}
	}
	if a.EtcdLeaderChanges < 1 {
		errs.add(ruleMonitoringCount, "monitoring.alerts.etcdLeaderChanges", strconv.Itoa(a.EtcdLeaderChanges))
	}
}

// monitoringDuration refuses value at key unless it is a positive duration in whole
// milliseconds (Prometheus's resolution), and returns it.
func monitoringDuration(errs *Errors, key, value string) (time.Duration, bool) {
	d, err := time.ParseDuration(value)
	if err != nil || d <= 0 || d%time.Millisecond != 0 {
		errs.add(ruleMonitoringDuration, key, value)
		return 0, false
	}
	return d, true
}

// MonitoringDuration is a monitoring duration of a validated Config.
func MonitoringDuration(value string) time.Duration {
	d, err := time.ParseDuration(value)
	if err != nil {
		panic("config: monitoring duration not validated: " + value)
	}
	return d
}
