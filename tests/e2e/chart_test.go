package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/railgrid/railgrid-kcp/config"
)

// writeOperatorChart generates, in dir, a local stand-in of the kcp-operator chart
// 0.7.10: Chart.yaml (version 0.7.10, appVersion v0.10.0), the operator.kcp.io CRDs from
// <crdsDir>/kcp-operator as templates/crds.yaml inside {{- if .Values.crds.create }}
// (the chart ships its CRDs as templates, which is what makes uninstalling it dangerous),
// and the operator Deployment kcp-operator, so the release has a workload to wait for.
// It returns the chart directory.
func writeOperatorChart(dir, crdsDir string) (string, error) {
	chart := filepath.Join(dir, config.OperatorChartName)
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o700); err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(crdsDir, "kcp-operator", "*.yaml"))
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no kcp-operator CRDs in %s", filepath.Join(crdsDir, "kcp-operator"))
	}
	sort.Strings(files)
	var crds bytes.Buffer
	crds.WriteString("{{- if .Values.crds.create }}\n")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if bytes.Contains(data, []byte("{{")) {
			return "", fmt.Errorf("%s contains template delimiters", f)
		}
		crds.WriteString("---\n")
		crds.Write(bytes.TrimPrefix(data, []byte("---\n")))
		if !bytes.HasSuffix(data, []byte("\n")) {
			crds.WriteString("\n")
		}
	}
	crds.WriteString("{{- end }}\n")

	chartYAML := fmt.Sprintf(`apiVersion: v2
name: %s
description: Local stand-in of the kcp-operator chart for the railgrid-kcp e2e test
type: application
version: %s
appVersion: %q
`, config.OperatorChartName, config.DefaultOperatorChartVersion, config.DefaultOperatorImageTag)
	values := `crds:
  create: true
replicaCount: 1
image:
  repository: ghcr.io/kcp-dev/kcp-operator
  tag: ""
  pullPolicy: IfNotPresent
`
	deployment := `{{- $fullname := printf "%s-kcp-operator" .Release.Name -}}
{{- if contains "kcp-operator" .Release.Name }}{{ $fullname = .Release.Name }}{{ end -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $fullname }}
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: kcp-operator
    app.kubernetes.io/instance: {{ .Release.Name }}
    app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels:
      app.kubernetes.io/name: kcp-operator
      app.kubernetes.io/instance: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: kcp-operator
        app.kubernetes.io/instance: {{ .Release.Name }}
    spec:
      containers:
        - name: kcp-operator
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          args:
            - --metrics-bind-address=:8443
            - --leader-elect
            - --zap-log-level=info
          ports:
            - name: healthz
              containerPort: 8081
            - name: metrics
              containerPort: 8443
`
	for name, content := range map[string][]byte{
		"Chart.yaml":                []byte(chartYAML),
		"values.yaml":               []byte(values),
		"templates/crds.yaml":       crds.Bytes(),
		"templates/deployment.yaml": []byte(deployment),
	} {
		if err := os.WriteFile(filepath.Join(chart, name), content, 0o600); err != nil {
			return "", err
		}
	}
	return chart, nil
}
