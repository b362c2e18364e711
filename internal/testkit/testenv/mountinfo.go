package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// mount is one line of a process's mount table (proc(5), /proc/<pid>/mountinfo).
type mount struct {
	point       string   // the mount point, unescaped
	options     []string // the mount's own options: ro or rw, ...
	propagation []string // the optional fields: shared:N, master:N, ...
}

// readMounts reads the mount table of a process, "self" or a PID, in the kernel's
// order.
func readMounts(pid string) ([]mount, error) {
	data, err := os.ReadFile(filepath.Join("/proc", pid, "mountinfo"))
	if err != nil {
		return nil, err
	}
	return parseMounts(string(data)), nil
}

// parseMounts parses mountinfo lines:
//
//	id parent major:minor root mountpoint options [optional fields...] - type source super-options
func parseMounts(table string) []mount {
	var mounts []mount
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		m := mount{point: unescapeMount(f[4]), options: strings.Split(f[5], ",")}
		for _, opt := range f[6:] {
			if opt == "-" {
				break
			}
			m.propagation = append(m.propagation, opt)
		}
		mounts = append(mounts, m)
	}
	return mounts
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
