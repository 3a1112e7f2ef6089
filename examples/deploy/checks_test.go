package deploy

import (
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// problems collects what a checker finds.
type problems []error

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// expectError fails unless one of errs contains want.
func expectError(t *testing.T, errs []error, want string) {
	t.Helper()
	for _, err := range errs {
		if strings.Contains(err.Error(), want) {
			return
		}
	}
	t.Errorf("no error containing %q; got %v", want, errs)
}

// spec is what one build should deploy.
type spec struct {
	Device   string // --device
	ImageTag string // the Dockerfile target the image is built from
	GPU      bool   // requests nvidia.com/gpu
	Pull     bool   // the model comes from an init container's tessera pull
	Router   string // the endpoint picker of its InferencePool: "llm-d", "lwepp", or "" for none
}

// How `tessera serve` shuts down (examples/tessera/serve.go): on SIGTERM
// it drains for --drain-timeout (default 30s), then gives the HTTP server
// up to 2s to close.
const (
	defaultDrain   = 30 * time.Second
	shutdownGrace  = 2 * time.Second
	defaultTimeout = 10 * time.Minute // server.DefaultRequestTimeout
	minStartup     = 5 * time.Minute  // the least model-load time a startup probe should allow
	serverName     = "tessera"
	gpuResource    = corev1.ResourceName("nvidia.com/gpu")
)

// serverInfo is what the gateway checks need from the server's Deployment.
type serverInfo struct {
	Deployment     *appsv1.Deployment
	Port           int
	RequestTimeout time.Duration
	Grace          int64
}

// check runs every check of one build.
func check(o *objects, w *world, sp spec) []error {
	info, errs := checkServer(o, w, sp)
	errs = append(errs, checkServices(o)...)
	if info != nil {
		errs = append(errs, checkGateway(o, w, sp, info)...)
	}
	return errs
}

// env is a container's environment as $(VAR) references see it: literal
// values, and "" with from=true for values from secrets and fields.
type env map[string]struct {
	Value string
	From  bool
}

func containerEnv(c *corev1.Container) env {
	e := env{}
	for _, v := range c.Env {
		e[v.Name] = struct {
			Value string
			From  bool
		}{v.Value, v.ValueFrom != nil}
	}
	return e
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) as the kubelet does in args; a reference to a
// variable the container does not define, or one from a secret (whose
// value the test cannot know), is an error.
func (e env) expand(s string) (string, error) {
	var err error
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := m[2 : len(m)-1]
		v, ok := e[name]
		switch {
		case !ok:
			err = fmt.Errorf("%q refers to $(%s), which the container does not define", s, name)
		case v.From && v.Value == "":
			return m // from the API: kept, for the caller to judge
		}
		return v.Value
	})
	return out, err
}

// parseFlags reads --name=value and --name value (boolean flags take no
// value) into name -> values; known, if not nil, are the flags allowed.
func parseFlags(args []string, known map[string]bool) (map[string][]string, error) {
	flags := map[string][]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("argument %q is not a flag", a)
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		isBool, ok := known[name]
		if known != nil && !ok {
			return nil, fmt.Errorf("--%s is not a flag of tessera serve", name)
		}
		if !hasValue && !isBool {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("--%s wants a value", name)
			}
			i++
			value = args[i]
		}
		flags[name] = append(flags[name], value)
	}
	return flags, nil
}

// last is a flag's value as the flag package sees it (the last one wins),
// or def.
func last(flags map[string][]string, name, def string) string {
	if v := flags[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// portOf resolves a probe's or Service's port (a number or a port name)
// against a container's ports.
func portOf(p intstr.IntOrString, ports []corev1.ContainerPort) (int, bool) {
	if p.Type == intstr.Int {
		return p.IntValue(), p.IntValue() > 0
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), true
		}
	}
	return 0, false
}

func container(list []corev1.Container, name string) *corev1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func deployment(o *objects, name string) *appsv1.Deployment {
	for _, d := range o.Deployments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// selects reports whether a label selector picks a pod template's labels.
func selects(sel *metav1.LabelSelector, pod map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && sel != nil && !s.Empty() && s.Matches(labels.Set(pod))
}

// sleepSeconds is how long a preStop hook sleeps: the kubelet's sleep
// action, or exec of sleep N.
func sleepSeconds(h *corev1.LifecycleHandler) (int64, bool) {
	switch {
	case h == nil:
		return 0, false
	case h.Sleep != nil:
		return h.Sleep.Seconds, true
	case h.Exec != nil && len(h.Exec.Command) == 2 && path.Base(h.Exec.Command[0]) == "sleep":
		n, err := strconv.ParseInt(h.Exec.Command[1], 10, 64)
		return n, err == nil
	}
	return 0, false
}

// checkServer checks the Tessera Deployment against the server it runs.
func checkServer(o *objects, w *world, sp spec) (*serverInfo, []error) {
	var errs problems
	d := deployment(o, serverName)
	if d == nil {
		errs.add("no Deployment %s", serverName)
		return nil, errs
	}
	pod := &d.Spec.Template.Spec
	c := container(pod.Containers, serverName)
	if c == nil {
		errs.add("Deployment %s has no container %s", d.Name, serverName)
		return nil, errs
	}
	if !selects(d.Spec.Selector, d.Spec.Template.Labels) {
		errs.add("Deployment %s: its selector does not match its pod labels", d.Name)
	}

	// The command line, as the kubelet expands it.
	e := containerEnv(c)
	var args []string
	for _, a := range c.Args {
		x, err := e.expand(a)
		if err != nil {
			errs.add("container %s: %v", c.Name, err)
		}
		args = append(args, x)
	}
	if len(args) == 0 || args[0] != "serve" || len(c.Command) > 0 {
		errs.add("container %s: args %q: want the image's entrypoint (tessera) with serve ...", c.Name, args)
		return nil, errs
	}
	flags, err := parseFlags(args[1:], w.ServeFlags)
	if err != nil {
		errs.add("container %s: %v", c.Name, err)
		return nil, errs
	}
	info := &serverInfo{Deployment: d}
	host, port, err := net.SplitHostPort(last(flags, "addr", "127.0.0.1:8080"))
	if err == nil {
		info.Port, err = strconv.Atoi(port)
	}
	if err != nil {
		errs.add("--addr: %v", err)
	}
	if host != "0.0.0.0" && host != "" && host != "::" {
		errs.add("--addr listens on %s: the kubelet, Services and the gateway reach pods on their pod IP, so listen on 0.0.0.0", host)
	}
	listening := false
	for _, cp := range c.Ports {
		listening = listening || int(cp.ContainerPort) == info.Port
	}
	if !listening {
		errs.add("container %s declares no port %d, the one --addr listens on", c.Name, info.Port)
	}
	if got := last(flags, "device", "auto"); got != sp.Device {
		errs.add("--device=%s, want %s", got, sp.Device)
	}
	drain, err := time.ParseDuration(last(flags, "drain-timeout", defaultDrain.String()))
	if err != nil {
		errs.add("--drain-timeout: %v", err)
	}
	info.RequestTimeout, err = time.ParseDuration(last(flags, "request-timeout", defaultTimeout.String()))
	if err != nil {
		errs.add("--request-timeout: %v", err)
	}

	// Probes: on a path the server answers 200 once ready, on the port it
	// listens on.
	probes := []struct {
		name string
		p    *corev1.Probe
	}{{"startupProbe", c.StartupProbe}, {"readinessProbe", c.ReadinessProbe}, {"livenessProbe", c.LivenessProbe}}
	for _, pr := range probes {
		if pr.p == nil || pr.p.HTTPGet == nil {
			errs.add("container %s has no HTTP %s", c.Name, pr.name)
			continue
		}
		g := pr.p.HTTPGet
		if !w.serves(g.Path) {
			errs.add("%s: GET %s is not a path the server answers 200 on", pr.name, g.Path)
		}
		if p, ok := portOf(g.Port, c.Ports); !ok || p != info.Port {
			errs.add("%s: port %s is not %d, where the server listens", pr.name, g.Port.String(), info.Port)
		}
		if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
			errs.add("%s: scheme %s, but the server speaks plain HTTP", pr.name, g.Scheme)
		}
	}
	if p := c.StartupProbe; p != nil {
		if budget := probeBudget(p); budget < minStartup {
			errs.add("startupProbe allows %v for loading the model, want at least %v", budget, minStartup)
		}
	}

	// /health answers 503 through the drain: a liveness probe that gives up
	// sooner would restart a draining pod on kubelets that still probe
	// terminating pods (before 1.25).
	if p := c.LivenessProbe; p != nil {
		if budget := probeBudget(p); budget <= drain+shutdownGrace {
			errs.add("livenessProbe gives up after %v, within the drain's %v of 503s", budget, drain+shutdownGrace)
		}
	}

	// Shutdown: preStop, then the drain, then the server's close, all
	// within the grace period.
	sleep, ok := int64(0), false
	if c.Lifecycle != nil {
		sleep, ok = sleepSeconds(c.Lifecycle.PreStop)
	}
	if !ok || sleep <= 0 {
		errs.add("container %s: no preStop sleep (the pod would get SIGTERM while still in the endpoints)", c.Name)
	}
	info.Grace = 30
	if pod.TerminationGracePeriodSeconds != nil {
		info.Grace = *pod.TerminationGracePeriodSeconds
	}
	if need := time.Duration(sleep)*time.Second + drain + shutdownGrace; time.Duration(info.Grace)*time.Second < need {
		errs.add("terminationGracePeriodSeconds %d < preStop %ds + --drain-timeout %v + %v shutdown: the kubelet would kill requests still draining",
			info.Grace, sleep, drain, shutdownGrace)
	}

	// Prometheus scrape annotations.
	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" {
		errs.add("pods lack prometheus.io/scrape: \"true\"")
	}
	if ann["prometheus.io/port"] != strconv.Itoa(info.Port) {
		errs.add("prometheus.io/port %q is not the server's port %d", ann["prometheus.io/port"], info.Port)
	}
	if p := ann["prometheus.io/path"]; p != "/metrics" || !w.serves(p) {
		errs.add("prometheus.io/path %q: want /metrics, which the server serves", p)
	}

	// The model and its volume.
	mounted := func(c *corev1.Container, p string) (string, bool) {
		for _, m := range c.VolumeMounts {
			if p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/") {
				return m.Name, true
			}
		}
		return "", false
	}
	models := flags["model"]
	if len(models) == 0 {
		errs.add("no --model")
	}
	for _, m := range models {
		_, ref, ok := strings.Cut(m, "=")
		if !ok {
			ref = m
		}
		if strings.HasPrefix(ref, "/") {
			if sp.Pull {
				errs.add("--model %s is a path, but the model-pull component should serve a pulled REF", m)
			}
			if _, ok := mounted(c, ref); !ok {
				errs.add("--model %s is on no volume the container mounts", m)
			}
			continue
		}
		// A REF: an init container must pull it into the cache the server reads.
		if !sp.Pull {
			errs.add("--model %s is a REF, but this build has no init container pulling it", m)
		}
		cache := e["TESSERA_CACHE"].Value
		vol, ok := mounted(c, cache)
		if !ok {
			errs.add("TESSERA_CACHE=%q is on no volume the server mounts", cache)
		}
		if e["TESSERA_OFFLINE"].Value != "1" {
			errs.add("the server should run with TESSERA_OFFLINE=1, so a missing model fails at start instead of downloading")
		}
		pulled := false
		for i := range pod.InitContainers {
			ic := &pod.InitContainers[i]
			if len(ic.Args) < 2 || ic.Args[0] != "pull" || !contains(ic.Args[1:], ref) {
				continue
			}
			pulled = true
			if got := containerEnv(ic)["TESSERA_CACHE"].Value; got != cache {
				errs.add("init container %s pulls into TESSERA_CACHE=%q, the server reads %q", ic.Name, got, cache)
			}
			if v, ok := mounted(ic, cache); !ok || v != vol {
				errs.add("init container %s does not mount volume %s at the cache", ic.Name, vol)
			}
			if ic.Image != c.Image {
				errs.add("init container %s runs %s, the server %s", ic.Name, ic.Image, c.Image)
			}
		}
		if !pulled {
			errs.add("no init container runs tessera pull %s, the REF --model serves", ref)
		}
	}

	// Volumes: one source each, every mount backed, claims in the build and
	// shareable when the HPA may scale past one pod.
	vols := map[string]*corev1.Volume{}
	for i := range pod.Volumes {
		v := &pod.Volumes[i]
		vols[v.Name] = v
		if n := countSources(v.VolumeSource); n != 1 {
			errs.add("volume %s has %d sources, want 1", v.Name, n)
		}
		if pvc := v.PersistentVolumeClaim; pvc != nil {
			claim := (*corev1.PersistentVolumeClaim)(nil)
			for _, p := range o.PVCs {
				if p.Name == pvc.ClaimName {
					claim = p
				}
			}
			switch {
			case claim == nil:
				errs.add("volume %s claims %s, which the build does not create", v.Name, pvc.ClaimName)
			case !contains(claim.Spec.AccessModes, corev1.ReadWriteMany) && !contains(claim.Spec.AccessModes, corev1.ReadOnlyMany):
				errs.add("PVC %s is %v: replicas on different nodes cannot all mount it", claim.Name, claim.Spec.AccessModes)
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				if vols[m.Name] == nil {
					errs.add("container %s mounts %s, which is no volume of the pod", c.Name, m.Name)
				}
			}
		}
	}

	// The image and its user.
	_, tag, _ := strings.Cut(c.Image, ":")
	if tag != sp.ImageTag {
		errs.add("image %s: want the %s image (tag %s)", c.Image, sp.ImageTag, sp.ImageTag)
	}
	if w.Stages[tag] == nil {
		errs.add("image tag %s names no Dockerfile target", tag)
	} else if u, _ := effective(w.Stages, tag); pod.SecurityContext == nil || pod.SecurityContext.RunAsUser == nil || int(*pod.SecurityContext.RunAsUser) != uid(u) {
		errs.add("pod runAsUser is not %s, the Dockerfile's USER", u)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		errs.add("pod lacks runAsNonRoot: true")
	}

	// Resources and the GPU.
	req, lim := c.Resources.Requests, c.Resources.Limits
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := req[r]; !ok {
			errs.add("container %s requests no %s", c.Name, r)
		}
	}
	if m, ok := lim[corev1.ResourceMemory]; !ok {
		errs.add("container %s has no memory limit", c.Name)
	} else if r := req[corev1.ResourceMemory]; m.Cmp(r) < 0 {
		errs.add("memory limit %s < request %s", m.String(), r.String())
	}
	one := resource.MustParse("1")
	gl, hasLimit := lim[gpuResource]
	gr, hasReq := req[gpuResource]
	if sp.GPU {
		if !hasLimit || gl.Cmp(one) != 0 {
			errs.add("container %s: limits %s = %v, want 1", c.Name, gpuResource, gl.String())
		}
		if hasReq && gr.Cmp(gl) != 0 {
			errs.add("container %s: %s request %s differs from the limit %s", c.Name, gpuResource, gr.String(), gl.String())
		}
		caps := strings.Split(e["NVIDIA_DRIVER_CAPABILITIES"].Value, ",")
		for _, want := range []string{"compute", "graphics", "utility"} {
			if !contains(caps, want) {
				errs.add("NVIDIA_DRIVER_CAPABILITIES=%q lacks %s (Vulkan needs graphics)", e["NVIDIA_DRIVER_CAPABILITIES"].Value, want)
			}
		}
	} else if hasLimit || hasReq {
		errs.add("container %s asks for a GPU in a CPU build", c.Name)
	}
	if v, ok := e["NVIDIA_VISIBLE_DEVICES"]; ok {
		errs.add("NVIDIA_VISIBLE_DEVICES=%q in the pod: the device plugin sets it to the allocated GPU", v.Value)
	}

	// Autoscaling and disruptions.
	minReplicas := int32(1)
	scaled := false
	for _, h := range o.HPAs {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
			errs.add("HPA %s scales %s %s %s, not Deployment %s", h.Name, ref.APIVersion, ref.Kind, ref.Name, d.Name)
			continue
		}
		scaled = true
		if h.Spec.MinReplicas != nil {
			minReplicas = *h.Spec.MinReplicas
		}
		if h.Spec.MaxReplicas < minReplicas {
			errs.add("HPA %s: maxReplicas %d < minReplicas %d", h.Name, h.Spec.MaxReplicas, minReplicas)
		}
		if len(h.Spec.Metrics) == 0 {
			errs.add("HPA %s has no metrics", h.Name)
		}
		exposed, rerrs := customMetrics(w.Rules, w.Metrics)
		errs = append(errs, rerrs...)
		for _, m := range h.Spec.Metrics {
			if m.Type != "Pods" || m.Pods == nil {
				errs.add("HPA %s: metric of type %s; want Pods metrics from prometheus-adapter", h.Name, m.Type)
				continue
			}
			src, ok := exposed[m.Pods.Metric.Name]
			if !ok {
				errs.add("HPA %s: metric %s is not one the prometheus-adapter rules make from /metrics (they make %v)", h.Name, m.Pods.Metric.Name, keys(exposed))
				continue
			}
			if w.Metrics[src] != "gauge" {
				errs.add("HPA %s: %s comes from %s, a %s: averaging it over pods means nothing", h.Name, m.Pods.Metric.Name, src, w.Metrics[src])
			}
			if m.Pods.Target.Type != "AverageValue" || m.Pods.Target.AverageValue == nil || m.Pods.Target.AverageValue.Sign() <= 0 {
				errs.add("HPA %s: %s wants a positive AverageValue target", h.Name, m.Pods.Metric.Name)
			}
		}
	}
	if !scaled {
		errs.add("no HPA scales Deployment %s", d.Name)
	}
	if scaled && d.Spec.Replicas != nil {
		errs.add("Deployment %s sets replicas, which resets the HPA's count at every apply", d.Name)
	}
	pdbs := 0
	for _, p := range o.PDBs {
		if !selects(p.Spec.Selector, d.Spec.Template.Labels) {
			errs.add("PodDisruptionBudget %s selects none of the %s pods", p.Name, d.Name)
			continue
		}
		pdbs++
		switch {
		case p.Spec.MaxUnavailable != nil:
			if p.Spec.MaxUnavailable.Type == intstr.Int && p.Spec.MaxUnavailable.IntValue() < 1 {
				errs.add("PodDisruptionBudget %s: maxUnavailable < 1 blocks every node drain", p.Name)
			}
		case p.Spec.MinAvailable != nil:
			if p.Spec.MinAvailable.Type == intstr.Int && int32(p.Spec.MinAvailable.IntValue()) >= minReplicas {
				errs.add("PodDisruptionBudget %s: minAvailable %d blocks node drains at %d replicas", p.Name, p.Spec.MinAvailable.IntValue(), minReplicas)
			}
		default:
			errs.add("PodDisruptionBudget %s sets neither minAvailable nor maxUnavailable", p.Name)
		}
	}
	if pdbs != 1 {
		errs.add("%d PodDisruptionBudgets cover the %s pods, want 1", pdbs, d.Name)
	}
	return info, errs
}

// probeBudget is how long a probe keeps failing before it gives up, with
// the API's defaults (3 failures, 10s apart).
func probeBudget(p *corev1.Probe) time.Duration {
	n, period := p.FailureThreshold, p.PeriodSeconds
	if n == 0 {
		n = 3
	}
	if period == 0 {
		period = 10
	}
	return time.Duration(n*period) * time.Second
}

func countSources(v corev1.VolumeSource) int {
	n := 0
	for _, set := range []bool{v.HostPath != nil, v.EmptyDir != nil, v.PersistentVolumeClaim != nil, v.ConfigMap != nil,
		v.Secret != nil, v.Projected != nil, v.DownwardAPI != nil, v.Ephemeral != nil, v.CSI != nil, v.NFS != nil, v.Image != nil} {
		if set {
			n++
		}
	}
	return n
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkServices checks that every Service selects pods of the build and
// targets a port they declare.
func checkServices(o *objects) []error {
	var errs problems
	for _, s := range o.Services {
		var pods []*appsv1.Deployment
		for _, d := range o.Deployments {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				pods = append(pods, d)
			}
		}
		if len(pods) != 1 {
			errs.add("Service %s selects the pods of %d Deployments, want 1", s.Name, len(pods))
			continue
		}
		for _, p := range s.Spec.Ports {
			found := false
			for _, c := range pods[0].Spec.Template.Spec.Containers {
				if n, ok := portOf(p.TargetPort, c.Ports); ok {
					for _, cp := range c.Ports {
						found = found || int(cp.ContainerPort) == n
					}
				}
			}
			if !found {
				errs.add("Service %s port %s targets %s, which no container of %s declares", s.Name, p.Name, p.TargetPort.String(), pods[0].Name)
			}
		}
	}
	return errs
}

// adapterRule mirrors one rule of prometheus-adapter's configuration
// (pkg/config in kubernetes-sigs/prometheus-adapter), hand-written so the
// rules can be decoded strictly without that module.
type adapterRule struct {
	SeriesQuery   string `json:"seriesQuery"`
	SeriesFilters []struct {
		Is    string `json:"is,omitempty"`
		IsNot string `json:"isNot,omitempty"`
	} `json:"seriesFilters,omitempty"`
	Resources struct {
		Template  string `json:"template,omitempty"`
		Overrides map[string]struct {
			Group    string `json:"group,omitempty"`
			Resource string `json:"resource"`
		} `json:"overrides,omitempty"`
		Namespaced *bool `json:"namespaced,omitempty"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

type adapterConfig struct {
	Rules []adapterRule `json:"rules"`
}

var seriesName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)

// customMetrics applies the adapter's rules to the metric names /metrics
// exports and returns the custom metrics they expose per pod, each with
// the series it comes from.
func customMetrics(rules []adapterRule, exported map[string]string) (map[string]string, []error) {
	var errs problems
	out := map[string]string{}
	for _, r := range rules {
		m := seriesName.FindStringSubmatch(r.SeriesQuery)
		if m == nil {
			errs.add("adapter rule %q: want a seriesQuery of the form name{...}", r.SeriesQuery)
			continue
		}
		series := m[1]
		if _, ok := exported[series]; !ok {
			errs.add("adapter rule for %s, which /metrics does not export", series)
			continue
		}
		ov := r.Resources.Overrides
		if ov["namespace"].Resource != "namespace" || ov["pod"].Resource != "pod" {
			errs.add("adapter rule for %s does not map the namespace and pod labels to their resources", series)
		}
		for _, part := range []string{"<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"} {
			if !strings.Contains(r.MetricsQuery, part) {
				errs.add("adapter rule for %s: metricsQuery lacks %s", series, part)
			}
		}
		matches := r.Name.Matches
		if matches == "" {
			matches = ".*"
		}
		re, err := regexp.Compile(matches)
		if err != nil {
			errs.add("adapter rule for %s: %v", series, err)
			continue
		}
		if !re.MatchString(series) {
			errs.add("adapter rule for %s: name.matches %q does not match it", series, matches)
			continue
		}
		as := r.Name.As
		if as == "" {
			as = "$0"
			if re.NumSubexp() == 1 {
				as = "$1"
			}
		}
		name := re.ReplaceAllString(series, as)
		if strings.Contains(name, ":") {
			errs.add("adapter rule for %s names it %s: the custom metrics API's names should not hold colons", series, name)
		}
		out[name] = series
	}
	return out, errs
}

var errNoAdapter = errors.New("no prometheus-adapter ConfigMap")

// adapterRules reads the rules from the prometheus-adapter build.
func adapterRules(o *objects) ([]adapterRule, error) {
	for _, cm := range o.ConfigMaps {
		if cm.Name != "prometheus-adapter" {
			continue
		}
		var cfg adapterConfig
		if err := strictInto([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
			return nil, fmt.Errorf("prometheus-adapter config.yaml: %v", err)
		}
		if len(cfg.Rules) == 0 {
			return nil, fmt.Errorf("prometheus-adapter config.yaml has no rules")
		}
		return cfg.Rules, nil
	}
	return nil, errNoAdapter
}
