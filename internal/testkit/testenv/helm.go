package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Helm runs the Helm CLI (hack/build-tools.sh helm) with homes of its own: its cache,
// config and data (repositories, registry logins, downloaded indexes) live under Home,
// so a test neither reads nor changes the user's Helm setup, and two runs share nothing.
type Helm struct {
	// Bin is the helm executable.
	Bin string
	// Home holds HELM_CACHE_HOME, HELM_CONFIG_HOME and HELM_DATA_HOME.
	Home string
	// Env is added to the environment, for example SSL_CERT_FILE.
	Env []string
}

// Run runs helm with args and returns its standard output; an error carries its
// standard error.
func (h Helm) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.Home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.Home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.Home, "data"))
	cmd.Env = append(cmd.Env, h.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Package packages the chart directory chart into dest with `helm package` and returns
// the path of the archive, <name>-<version>.tgz as Helm names it.
func (h Helm) Package(ctx context.Context, chart, dest string) (string, error) {
	meta, err := ReadChartMetadata(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	if _, err := h.Run(ctx, "package", chart, "--destination", dest); err != nil {
		return "", err
	}
	archive := filepath.Join(dest, meta.Name+"-"+meta.Version+".tgz")
	if _, err := os.Stat(archive); err != nil {
		return "", fmt.Errorf("helm package %s: %w", chart, err)
	}
	return archive, nil
}

// ChartMetadata is what a test checks of a chart's Chart.yaml.
type ChartMetadata struct {
	Name       string `yaml:"name"`
	Version    string `yaml:"version"`
	AppVersion string `yaml:"appVersion"`
}

// ReadChartMetadata reads the name and versions of a Chart.yaml.
func ReadChartMetadata(path string) (ChartMetadata, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ChartMetadata{}, err
	}
	return parseChartMetadata(path, data)
}

// ReadArchiveChartMetadata reads the Chart.yaml of a packaged chart (a .tgz as helm
// package writes it and helm pull fetches it): the one directly under the archive's
// top directory, not a subchart's.
func ReadArchiveChartMetadata(archive string) (ChartMetadata, error) {
	f, err := os.Open(archive)
	if err != nil {
		return ChartMetadata{}, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return ChartMetadata{}, fmt.Errorf("%s: %w", archive, err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return ChartMetadata{}, fmt.Errorf("%s has no <chart>/Chart.yaml", archive)
		}
		if err != nil {
			return ChartMetadata{}, fmt.Errorf("%s: %w", archive, err)
		}
		top, rest, _ := strings.Cut(hdr.Name, "/")
		if rest != "Chart.yaml" || top == "" {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return ChartMetadata{}, fmt.Errorf("%s: %w", archive, err)
		}
		return parseChartMetadata(archive+": "+hdr.Name, data)
	}
}

func parseChartMetadata(path string, data []byte) (ChartMetadata, error) {
	var meta ChartMetadata
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return ChartMetadata{}, fmt.Errorf("%s: %w", path, err)
	}
	if meta.Name == "" || meta.Version == "" {
		return ChartMetadata{}, fmt.Errorf("%s has no name or no version", path)
	}
	return meta, nil
}
