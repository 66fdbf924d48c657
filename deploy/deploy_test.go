// Package deploy holds the packaging (Dockerfile and compose.yaml at the
// root, systemd, Kubernetes, Prometheus, Grafana under deploy/) and the tests
// that check it on a machine without Docker or a cluster: the alert rules
// with promtool, the manifests by strict decoding into the Kubernetes API
// types, the release targets by building them.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemarkhq/tidemark/events"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/metrics"

	_ "github.com/tidemarkhq/tidemark/clients/provider/all"
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tool finds a command; under CI=true its absence fails (.ci/run installs it).
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found (CI=true, so this fails): apt-get install -y %s", name, pkg)
	}
	t.Skipf("%s not found: apt-get install -y %s", name, pkg)
	return ""
}

func runTool(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Every alert parses, and each fires (and only then) on recorded series.
func TestAlertRulesWithPromtool(t *testing.T) {
	t.Parallel()
	promtool := tool(t, "promtool", "prometheus")
	runTool(t, "prometheus", promtool, "check", "rules", "alerts.yml")
	out := runTool(t, "prometheus", promtool, "test", "rules", "alerts_test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
	runTool(t, "prometheus", promtool, "check", "config", "prometheus.yml")
	// Every alert has a test.
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert string }
		}
	}
	if err := yaml.Unmarshal(read(t, "prometheus/alerts.yml"), &rules); err != nil {
		t.Fatal(err)
	}
	tests := string(read(t, "prometheus/alerts_test.yml"))
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if !strings.Contains(tests, "alertname: "+r.Alert) {
				t.Errorf("alert %s has no test in alerts_test.yml", r.Alert)
			}
		}
	}
}

// metricNames are the series names the daemon exports.
func metricNames(t *testing.T) map[string]bool {
	m := metrics.New()
	m.Records("s", "r", "inserted", 1)
	m.Request("s", 402)
	m.Pass("s", "r", "reconcile", "refused", time.Second)
	m.Pass("s", "r", "incremental", "ok", time.Second)
	m.Lag("s", "r", time.Second)
	m.BackfillProgress("s", "r", false)
	m.Wait("s", "quota", time.Now())
	m.Schedule("s", time.Minute)
	m.FleetSources([]string{"s"}, []string{"t"})
	m.Reloaded(false, time.Now())
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	// The change feed's collector reads the database when scraped: its
	// names come from its descriptions.
	descs := make(chan *prometheus.Desc, 16)
	(&events.Collector{}).Describe(descs)
	close(descs)
	for d := range descs {
		names[metricRef.FindString(d.String())] = true
	}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

var metricRef = regexp.MustCompile(`tidemark_[a-z_]+`)

// The dashboard and the alerts only use metrics the daemon exports (a
// rename would otherwise leave an empty panel or a silent alert).
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	t.Parallel()
	names := metricNames(t)
	var dash struct {
		UID    string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(read(t, "grafana/tidemark.json"), &dash); err != nil {
		t.Fatalf("grafana/tidemark.json: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) < 8 {
		t.Fatalf("dashboard: uid %q, %d panels", dash.UID, len(dash.Panels))
	}
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range metricRef.FindAllString(tg.Expr, -1) {
				used[n] = true
				if !names[n] {
					t.Errorf("panel %q uses %s, which the daemon does not export", p.Title, n)
				}
			}
		}
	}
	for _, n := range metricRef.FindAllString(string(read(t, "prometheus/alerts.yml")), -1) {
		if !names[n] {
			t.Errorf("alerts.yml uses %s, which the daemon does not export", n)
		}
	}
	for _, want := range []string{"tidemark_records_total", "tidemark_requests_total", "tidemark_cursor_lag_seconds"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// dockerfile is the Dockerfile as (instruction, arguments) lines, with
// continuation lines joined and comments dropped.
func dockerfile(t *testing.T) [][2]string {
	var out [][2]string
	sc := bufio.NewScanner(bytes.NewReader(read(t, "../Dockerfile")))
	var cur string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cur += line
		inst, args, _ := strings.Cut(cur, " ")
		out = append(out, [2]string{strings.ToUpper(inst), strings.TrimSpace(args)})
		cur = ""
	}
	return out
}

// No Docker engine here: the Dockerfile is checked as text. Multi-stage,
// a static build, a non-root user in the final stage, a HEALTHCHECK that the
// binary itself answers, the version stamped.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	lines := dockerfile(t)
	var froms []int
	for i, l := range lines {
		if !slices.Contains([]string{"FROM", "WORKDIR", "COPY", "RUN", "ARG", "USER", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD", "ENV", "LABEL"}, l[0]) {
			t.Errorf("unknown instruction %q", l[0])
		}
		if l[0] == "FROM" {
			froms = append(froms, i)
		}
	}
	if len(froms) < 2 {
		t.Fatalf("not multi-stage: %d FROM", len(froms))
	}
	// Every base image pinned by digest (issue 26, 12): a tag moves.
	pinned := regexp.MustCompile(`^(--platform=\S+ )?\S+:\S+@sha256:[0-9a-f]{64}( AS \S+)?$`)
	for _, i := range froms {
		if !pinned.MatchString(lines[i][1]) {
			t.Errorf("FROM %s: not pinned by digest", lines[i][1])
		}
	}
	final := lines[froms[len(froms)-1]:]
	has := func(stage [][2]string, inst, sub string) bool {
		for _, l := range stage {
			if l[0] == inst && strings.Contains(l[1], sub) {
				return true
			}
		}
		return false
	}
	build := lines[:froms[len(froms)-1]]
	for _, want := range []string{"CGO_ENABLED=0", "-X main.version=", "-X main.commit=", "./cmd/tidemark"} {
		if !has(build, "RUN", want) {
			t.Errorf("the build stage does not build with %s", want)
		}
	}
	if !has(final, "COPY", "--from=") {
		t.Error("the final stage does not copy the binary from the build stage")
	}
	var user string
	for _, l := range final {
		if l[0] == "USER" {
			user = l[1]
		}
	}
	if user == "" || user == "root" || strings.HasPrefix(user, "0") {
		t.Errorf("the final stage runs as %q, want a non-root user", user)
	}
	if !has(final, "HEALTHCHECK", `"health"`) || !has(final, "HEALTHCHECK", "/healthz") {
		t.Error("no HEALTHCHECK asking /healthz through `tidemark health`")
	}
}

// compose.yaml: the services a newcomer expects, the fleet config it mounts
// parses, and Prometheus scrapes both replicas.
func TestCompose(t *testing.T) {
	t.Parallel()
	var c struct {
		Services map[string]struct {
			Image       string
			Command     []string
			Environment map[string]string
			Volumes     []string
			DependsOn   map[string]map[string]string `yaml:"depends_on"`
		}
	}
	if err := yaml.Unmarshal(read(t, "../compose.yaml"), &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, s := range []string{"postgres", "tracker", "migrate", "tidemark-1", "tidemark-2", "prometheus", "grafana"} {
		if _, ok := c.Services[s]; !ok {
			t.Errorf("compose.yaml has no service %s", s)
		}
	}
	for _, r := range []string{"tidemark-1", "tidemark-2"} {
		s := c.Services[r]
		if !slices.Contains(s.Command, "run") || s.DependsOn["migrate"]["condition"] != "service_completed_successfully" {
			t.Errorf("%s: command %v, depends on %v", r, s.Command, s.DependsOn)
		}
		env := s.Environment
		cfg, err := config.Parse("../configs/fleet.yaml", read(t, "../configs/fleet.yaml"), func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		})
		if err != nil {
			t.Fatalf("%s: configs/fleet.yaml with its environment: %v", r, err)
		}
		if len(cfg.Sources) < 2 || !strings.HasSuffix(cfg.Listen, ":9464") {
			t.Fatalf("fleet config: %d sources, listen %q", len(cfg.Sources), cfg.Listen)
		}
	}
	prom := string(read(t, "prometheus/prometheus.yml"))
	for _, target := range []string{"tidemark-1:9464", "tidemark-2:9464"} {
		if !strings.Contains(prom, target) {
			t.Errorf("prometheus.yml does not scrape %s", target)
		}
	}
}

// The systemd unit is hardened, restarts, and takes its secrets as
// credentials; systemd-analyze verifies it where it is installed.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	unit := string(read(t, "systemd/tidemark.service"))
	for _, want := range []string{"DynamicUser=yes", "ProtectSystem=strict", "Restart=on-failure", "LoadCredential=",
		"EnvironmentFile=", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n", "ExecStart=", "TimeoutStopSec=",
		"RestartPreventExitStatus=2\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("tidemark.service lacks %q", want)
		}
	}
	// The README section the unit points to exists.
	if m := regexp.MustCompile(`README, "([^"]+)"`).FindStringSubmatch(unit); m == nil ||
		!strings.Contains(string(read(t, "../README.md")), "\n## "+m[1]+"\n") {
		t.Errorf("the unit points to a README section that is not there: %v", m)
	}
	if strings.Contains(strings.ToLower(unit), "token=") && !strings.Contains(unit, "CREDENTIALS_DIRECTORY") {
		t.Error("a token in the unit")
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		out, err := exec.Command(sa, "verify", "systemd/tidemark.service").CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
	}
}

// Each manifest decodes strictly into its Kubernetes API type (k8s.io/api):
// an unknown field or a wrong type fails, as the API server's schema
// validation would refuse it. Then what the issue asks of them.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	strict := func(file string, into any) {
		t.Helper()
		if err := sigsyaml.UnmarshalStrict(read(t, filepath.Join("kubernetes", file)), into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	var dep appsv1.Deployment
	var pdb policyv1.PodDisruptionBudget
	var sec, svc, ns = corev1.Secret{}, corev1.Service{}, corev1.Namespace{}
	strict("deployment.yaml", &dep)
	strict("pdb.yaml", &pdb)
	strict("secret.example.yaml", &sec)
	strict("service.yaml", &svc)
	strict("namespace.yaml", &ns)
	for kind, got := range map[string]string{"Deployment": dep.Kind, "PodDisruptionBudget": pdb.Kind,
		"Secret": sec.Kind, "Service": svc.Kind, "Namespace": ns.Kind} {
		if got != kind {
			t.Errorf("kind %q, want %s", got, kind)
		}
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Error("the Deployment does not run 2 replicas")
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	if p := ctr.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Error("readiness is not /readyz")
	}
	if p := ctr.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Error("liveness is not /healthz")
	}
	fromSecret := 0
	for _, e := range ctr.Env {
		if e.Value != "" && strings.Contains(strings.ToUpper(e.Name), "TOKEN") {
			t.Errorf("token %s given in clear", e.Name)
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == sec.Name {
			fromSecret++
			if _, ok := sec.StringData[e.ValueFrom.SecretKeyRef.Key]; !ok {
				t.Errorf("env %s: the Secret has no key %s", e.Name, e.ValueFrom.SecretKeyRef.Key)
			}
		}
	}
	if fromSecret < 2 {
		t.Error("the tokens and the database URL do not come from the Secret")
	}
	if sc := dep.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pods may run as root")
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("the PDB selects %s=%s, which the Deployment's pods do not carry", k, v)
		}
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Error("the PDB does not keep one replica")
	}
	// The config the ConfigMap is generated from parses with the Secret's
	// variables.
	if _, err := config.Parse("tidemark.yaml", read(t, "kubernetes/tidemark.yaml"), func(k string) (string, bool) {
		v, ok := sec.StringData[k]
		return v, ok
	}); err != nil {
		t.Fatalf("the ConfigMap's tidemark.yaml: %v", err)
	}
	var kust struct{ Resources []string }
	if err := yaml.Unmarshal(read(t, "kubernetes/kustomization.yaml"), &kust); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		// Not resources: the kustomization, the config its generator
		// reads, and the example Secret (an apply must never overwrite
		// the user's).
		if b := filepath.Base(f); b != "kustomization.yaml" && b != "tidemark.yaml" && !strings.HasSuffix(b, ".example.yaml") &&
			!slices.Contains(kust.Resources, b) {
			t.Errorf("kustomization.yaml does not list %s", b)
		}
	}
	for _, r := range kust.Resources {
		if strings.Contains(r, "secret") {
			t.Errorf("kustomization.yaml lists %s: a later apply would overwrite the user's Secret", r)
		}
	}
}

// kustomize renders deploy/kubernetes as `kubectl apply -k` would apply
// it, from dir.
func kustomize(t *testing.T, dir string) (dep appsv1.Deployment, cms []corev1.ConfigMap, kinds []string) {
	t.Helper()
	out := runTool(t, ".", tool(t, "kubectl", "kubectl"), "kustomize", dir)
	for _, doc := range strings.Split(out, "\n---\n") {
		var meta struct{ Kind string }
		if err := sigsyaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, meta.Kind)
		switch meta.Kind {
		case "Deployment":
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &dep); err != nil {
				t.Fatal(err)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatal(err)
			}
			cms = append(cms, cm)
		}
	}
	return dep, cms, kinds
}

// Upgrades work with the manifests as `kubectl apply -k` applies them
// (issue 26, 10; issue 25, 4): every image pinned to one release version,
// the schema migrated by an init container of every pod (so on every
// upgrade, with no Job to collide with its predecessor), no Secret to
// overwrite, GOMEMLIMIT from the memory limit, and a ConfigMap named by its
// content, so that a changed config rolls the pods.
func TestKubernetesUpgrades(t *testing.T) {
	t.Parallel()
	dep, cms, kinds := kustomize(t, "kubernetes")
	for _, k := range kinds {
		if k == "Secret" || k == "Job" {
			t.Errorf("the kustomization applies a %s", k)
		}
	}
	pod := dep.Spec.Template.Spec
	pinned := regexp.MustCompile(`^ghcr\.io/tidemarkhq/tidemark:v\d+\.\d+\.\d+$`)
	tags := map[string]bool{}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		if !pinned.MatchString(c.Image) {
			t.Errorf("container %s runs %q, not a release version", c.Name, c.Image)
		}
		tags[c.Image] = true
	}
	if len(tags) != 1 {
		t.Errorf("the containers run different images: %v", tags)
	}
	if len(pod.InitContainers) != 1 || !slices.Equal(pod.InitContainers[0].Args, []string{"migrate"}) {
		t.Fatalf("no init container running `tidemark migrate`: %+v", pod.InitContainers)
	}
	if env := pod.InitContainers[0].Env; len(env) == 0 || env[0].Name != "DATABASE_URL" || env[0].ValueFrom == nil || env[0].ValueFrom.SecretKeyRef == nil {
		t.Error("the migrate init container does not take DATABASE_URL from the Secret")
	}
	ctr := pod.Containers[0]
	memLimit := false
	for _, e := range ctr.Env {
		if e.Name == "GOMEMLIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" && e.ValueFrom.ResourceFieldRef.ContainerName == ctr.Name {
			memLimit = true
		}
	}
	if _, ok := ctr.Resources.Limits[corev1.ResourceMemory]; !ok || !memLimit {
		t.Error("GOMEMLIMIT does not come from the container's memory limit (downward API)")
	}
	configMap := func(cms []corev1.ConfigMap, dep appsv1.Deployment) string {
		t.Helper()
		if len(cms) != 1 {
			t.Fatalf("%d ConfigMaps", len(cms))
		}
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil {
				if v.ConfigMap.Name != cms[0].Name {
					t.Fatalf("the pods mount ConfigMap %s, the kustomization makes %s", v.ConfigMap.Name, cms[0].Name)
				}
				return v.ConfigMap.Name
			}
		}
		t.Fatal("the pods mount no ConfigMap")
		return ""
	}
	before := configMap(cms, dep)
	// A changed config: a ConfigMap of another name, so a new pod template.
	dir := t.TempDir()
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		b := read(t, f)
		if filepath.Base(f) == "tidemark.yaml" {
			b = bytes.Replace(b, []byte(`"*/5 * * * *"`), []byte(`"*/10 * * * *"`), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dep2, cms2, _ := kustomize(t, dir)
	if after := configMap(cms2, dep2); after == before {
		t.Errorf("a changed config keeps the ConfigMap's name %s: the pods would not roll", before)
	}
}

// The release targets of .goreleaser.yaml build with its ldflags, and the
// version and commit are stamped (`tidemark version` on this machine's
// target; the stamp's bytes in the others). A cross-build compiles the
// standard library and every dependency again for its target (about a
// minute each on a cold cache, on 2 cores), which made this package the
// slowest of the README's test command. So by default only this machine's
// target is built, with the release flags, which are also those of the
// binary the cmd/tidemark end-to-end tests build (one compile serves
// both); the other targets are checked with `go list` (each package has
// files for the target and its imports resolve: a build-constraint
// mistake fails here). TIDEMARK_RELEASE_MATRIX=1 builds all four (.ci/run
// does, in a step of its own after the tests); -short skips the `go list`
// checks.
func TestReleaseBuilds(t *testing.T) {
	t.Parallel()
	var gr struct {
		Version int
		Builds  []struct {
			Main    string
			Env     []string
			Goos    []string
			Goarch  []string
			Flags   []string
			Ldflags []string
		}
	}
	if err := yaml.Unmarshal(read(t, "../.goreleaser.yaml"), &gr); err != nil {
		t.Fatal(err)
	}
	if gr.Version != 2 || len(gr.Builds) != 1 {
		t.Fatalf(".goreleaser.yaml: version %d, %d builds", gr.Version, len(gr.Builds))
	}
	b := gr.Builds[0]
	if !slices.Equal(b.Goos, []string{"linux", "darwin"}) || !slices.Equal(b.Goarch, []string{"amd64", "arm64"}) {
		t.Fatalf("targets %v × %v", b.Goos, b.Goarch)
	}
	const ver, commit = "v0.0.0-releasetest", "0123456789abcdef"
	ld := strings.NewReplacer("{{.Version}}", ver, "{{.Commit}}", commit, "{{.Date}}", "2026-01-01T00:00:00Z").Replace(strings.Join(b.Ldflags, " "))
	dir := t.TempDir()
	for _, goos := range b.Goos {
		for _, goarch := range b.Goarch {
			native := goos == runtime.GOOS && goarch == runtime.GOARCH
			if !native && os.Getenv("TIDEMARK_RELEASE_MATRIX") != "1" {
				if !testing.Short() {
					listTarget(t, goos, goarch, b.Env, ".."+strings.TrimPrefix(b.Main, "."))
				}
				continue
			}
			out := filepath.Join(dir, "tidemark-"+goos+"-"+goarch)
			args := append(append([]string{"build"}, b.Flags...), "-ldflags", ld, "-o", out, ".."+strings.TrimPrefix(b.Main, "."))
			c := exec.Command("go", args...)
			c.Env = append(append(os.Environ(), b.Env...), "GOOS="+goos, "GOARCH="+goarch)
			if msg, err := c.CombinedOutput(); err != nil {
				t.Fatalf("%s/%s: go %s: %v\n%s", goos, goarch, strings.Join(args, " "), err, msg)
			}
			bin := read(t, out)
			if !bytes.Contains(bin, []byte(ver)) || !bytes.Contains(bin, []byte(commit)) {
				t.Errorf("%s/%s: version or commit not stamped", goos, goarch)
			}
			if native {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				got, err := exec.CommandContext(ctx, out, "version").Output()
				cancel()
				if err != nil || !strings.Contains(string(got), ver) || !strings.Contains(string(got), commit) {
					t.Errorf("tidemark version: %q %v", got, err)
				}
			}
		}
	}
}

// listTarget checks with `go list` (no compile) that main and every
// package it imports have files for goos/goarch and resolve their imports.
func listTarget(t *testing.T, goos, goarch string, env []string, main string) {
	t.Helper()
	c := exec.Command("go", "list", "-e", "-deps", "-f", "{{with .Error}}{{.}}\n{{end}}{{range .DepsErrors}}{{.}}\n{{end}}", main)
	c.Env = append(append(os.Environ(), env...), "GOOS="+goos, "GOARCH="+goarch)
	out, err := c.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("%s/%s: go list %s: %v\n%s", goos, goarch, main, err, out)
	}
}
