package deploy

import (
	"bytes"
	"encoding/json"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// checkGateway checks the InferencePool, its endpoint picker and the
// HTTPRoute against the server's Deployment.
func checkGateway(o *objects, w *world, sp spec, info *serverInfo) []error {
	var errs problems
	if sp.Router == "" {
		if len(o.Pools)+len(o.Routes) > 0 {
			errs.add("InferencePool or HTTPRoute in a build without a router component")
		}
		return errs
	}
	if len(o.Pools) != 1 {
		errs.add("%d InferencePools, want 1", len(o.Pools))
		return errs
	}
	pool := o.Pools[0]
	sel := map[string]string{}
	for k, v := range pool.Spec.Selector.MatchLabels {
		sel[string(k)] = string(v)
	}
	for _, d := range o.Deployments {
		matches := len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(d.Spec.Template.Labels))
		if d == info.Deployment && !matches {
			errs.add("InferencePool %s selects %v, not the %s pods %v", pool.Name, sel, d.Name, d.Spec.Template.Labels)
		}
		if d != info.Deployment && matches {
			errs.add("InferencePool %s selects the pods of %s too", pool.Name, d.Name)
		}
	}
	if tp := pool.Spec.TargetPorts; len(tp) != 1 || int(tp[0].Number) != info.Port {
		errs.add("InferencePool %s targets ports %v, want [%d] where the server listens", pool.Name, tp, info.Port)
	}
	if p := pool.Spec.AppProtocol; p != "" && p != "http" {
		errs.add("InferencePool %s: appProtocol %s, but the server speaks HTTP/1.1 and h2c only through HTTP", pool.Name, p)
	}

	// The endpoint picker: its Service, Deployment, image and flags.
	ref := pool.Spec.EndpointPickerRef
	if ref == nil || (ref.Kind != "" && ref.Kind != "Service") || (ref.Group != nil && *ref.Group != "") || ref.Port == nil {
		errs.add("InferencePool %s: endpointPickerRef should be a core Service with a port", pool.Name)
		return errs
	}
	var epp *appsv1.Deployment
	eppPort := 0
	for _, s := range o.Services {
		if s.Name != string(ref.Name) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Port != int32(ref.Port.Number) {
				continue
			}
			for _, d := range o.Deployments {
				if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
					epp = d
					if len(d.Spec.Template.Spec.Containers) > 0 {
						eppPort, _ = portOf(p.TargetPort, d.Spec.Template.Spec.Containers[0].Ports)
					}
				}
			}
		}
	}
	if epp == nil || len(epp.Spec.Template.Spec.Containers) != 1 {
		errs.add("InferencePool %s: no Service %s port %d in front of an endpoint picker Deployment", pool.Name, ref.Name, ref.Port.Number)
		return errs
	}
	pc := &epp.Spec.Template.Spec.Containers[0]
	image, known := routerImage, routerFlags
	if sp.Router == "lwepp" {
		image, known = lweppImage, lweppFlags
	}
	if pc.Image != image {
		errs.add("endpoint picker image %s, want %s", pc.Image, image)
	}
	e := containerEnv(pc)
	var args []string
	for _, a := range pc.Args {
		x, err := e.expand(a)
		if err != nil {
			errs.add("endpoint picker: %v", err)
		}
		args = append(args, x)
	}
	flags, err := parseFlags(args, known)
	if err != nil {
		errs.add("endpoint picker: %v", strings.Replace(err.Error(), "of tessera serve", "of the endpoint picker", 1))
		return errs
	}
	for _, f := range deprecatedRouterFlags {
		if _, ok := flags[f]; ok {
			errs.add("endpoint picker --%s: deprecated since llm-d-router v0.9; name the metric in the core-metrics-extractor's engineConfigs", f)
		}
	}
	if got := last(flags, "pool-name", ""); got != pool.Name {
		errs.add("endpoint picker --pool-name=%q, want %s", got, pool.Name)
	}
	ns := last(flags, "pool-namespace", "")
	if !strings.HasPrefix(ns, "$(") || !fieldRef(pc, strings.Trim(ns, "$()"), "metadata.namespace") {
		errs.add("endpoint picker --pool-namespace=%q: want the pod's namespace, from metadata.namespace", ns)
	}
	if g := last(flags, "pool-group", "inference.networking.k8s.io"); g != "inference.networking.k8s.io" {
		errs.add("endpoint picker --pool-group=%s, the pool is inference.networking.k8s.io", g)
	}
	if got := last(flags, "grpc-port", "9002"); got != strconv.Itoa(eppPort) {
		errs.add("endpoint picker serves gRPC on %s, its Service sends to %d", got, eppPort)
	}
	if g := epp.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < info.Grace {
		errs.add("endpoint picker's grace period is shorter than the pool's %ds", info.Grace)
	}
	if sp.Router == "llm-d" {
		data, err := mountedFile(o, epp, last(flags, "config-file", ""))
		if err != nil {
			errs.add("endpoint picker: %v", err)
		} else {
			_, cerrs := checkRouterConfig(data, w)
			errs = append(errs, cerrs...)
		}
	}
	errs = append(errs, checkEPPAccess(o, epp, pool.Name, sp.Router == "llm-d")...)

	// The route: to the pool, with room for long generations.
	if len(o.Routes) == 0 {
		errs.add("no HTTPRoute to InferencePool %s", pool.Name)
	}
	for _, r := range o.Routes {
		if len(r.Spec.ParentRefs) == 0 {
			errs.add("HTTPRoute %s has no parentRefs", r.Name)
		}
		for _, rule := range r.Spec.Rules {
			if len(rule.BackendRefs) == 0 {
				errs.add("HTTPRoute %s: a rule without backendRefs", r.Name)
			}
			for _, b := range rule.BackendRefs {
				if b.Group == nil || *b.Group != "inference.networking.k8s.io" || b.Kind == nil || *b.Kind != "InferencePool" || string(b.Name) != pool.Name {
					errs.add("HTTPRoute %s: backendRef %v %v %s is not InferencePool %s", r.Name, deref(b.Group), deref(b.Kind), b.Name, pool.Name)
				}
			}
			if rule.Timeouts == nil || rule.Timeouts.Request == nil {
				errs.add("HTTPRoute %s: no request timeout; gateways' defaults (Envoy: 15s) cut long generations", r.Name)
				continue
			}
			if t, err := time.ParseDuration(string(*rule.Timeouts.Request)); err != nil || (t != 0 && t < info.RequestTimeout) {
				errs.add("HTTPRoute %s: request timeout %s is shorter than the server's --request-timeout %v", r.Name, *rule.Timeouts.Request, info.RequestTimeout)
			}
		}
	}
	return errs
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// fieldRef reports whether the container's variable comes from fieldPath.
func fieldRef(c *corev1.Container, name, fieldPath string) bool {
	for _, v := range c.Env {
		if v.Name == name && v.ValueFrom != nil && v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == fieldPath {
			return true
		}
	}
	return false
}

// mountedFile finds a file the picker reads in a ConfigMap of the build
// that its container mounts.
func mountedFile(o *objects, d *appsv1.Deployment, file string) (string, error) {
	if file == "" {
		return "", errorf("no --config-file")
	}
	spec := &d.Spec.Template.Spec
	for _, m := range spec.Containers[0].VolumeMounts {
		if path.Dir(file) != path.Clean(m.MountPath) {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			for _, cm := range o.ConfigMaps {
				if data, ok := cm.Data[path.Base(file)]; ok && cm.Name == v.ConfigMap.Name {
					return data, nil
				}
			}
		}
	}
	return "", errorf("--config-file=%s is in no mounted ConfigMap of the build", file)
}

// metricSpec is a metric the router reads, name{label=value,...}.
var metricSpec = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?$`)

// checkRouterConfig decodes the router's configuration strictly into the
// v0.10.0 schema, each plugin's parameters into its own, and checks it
// against the server: the metrics it reads are gauges /metrics exports
// (with the labels it reads them by), and one scheduling profile scores
// prefix affinity and LoRA affinity.
func checkRouterConfig(data string, w *world) (*EndpointPickerConfig, []error) {
	var errs problems
	var cfg EndpointPickerConfig
	if err := strictInto([]byte(data), &cfg); err != nil {
		errs.add("router config: %v", err)
		return nil, errs
	}
	if cfg.APIVersion != "llm-d.ai/v1alpha1" || cfg.Kind != "EndpointPickerConfig" {
		errs.add("router config is %s %s, want llm-d.ai/v1alpha1 EndpointPickerConfig (the router's since it left GAIE)", cfg.APIVersion, cfg.Kind)
	}
	types := map[string]string{} // plugin name → type
	params := map[string]any{}   // plugin name → decoded parameters
	for _, p := range cfg.Plugins {
		n := p.Name
		if n == "" {
			n = p.Type
		}
		if _, dup := types[n]; dup {
			errs.add("router config: two plugins named %s", n)
		}
		types[n] = p.Type
		mk, ok := routerPlugins[p.Type]
		if !ok {
			errs.add("router config: plugin type %q is not one llm-d-router v0.10.0 registers for this pool", p.Type)
			continue
		}
		v := mk()
		switch {
		case v == nil && len(p.Parameters) > 0:
			errs.add("router config: %s takes no parameters", p.Type)
		case v != nil && len(p.Parameters) > 0:
			dec := json.NewDecoder(bytes.NewReader(p.Parameters))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				errs.add("router config: %s parameters: %v", p.Type, err)
				continue
			}
			params[n] = v
		}
	}
	ofType := func(t string) []string {
		var names []string
		for n, typ := range types {
			if typ == t {
				names = append(names, n)
			}
		}
		return names
	}

	// The prefix index: sized, or tuned from the pods' metrics.
	for _, n := range ofType("approx-prefix-cache-producer") {
		p, _ := params[n].(*approxPrefixParams)
		if p == nil || p.AutoTune == nil || *p.AutoTune {
			continue // autoTune (the default) reads vllm:cache_config_info, checked below
		}
		if p.BlockSizeTokens <= 0 || p.LRUCapacityPerServer <= 0 || p.BlockSize > 0 {
			errs.add("router config: %s without autoTune wants blockSizeTokens and lruCapacityPerServer (and not the deprecated blockSize): %+v", n, *p)
		}
	}

	// The metrics it scrapes, and the names it reads them by.
	for _, n := range ofType("metrics-data-source") {
		if p, _ := params[n].(*metricsSourceParams); p != nil {
			if p.Scheme != "" && p.Scheme != "http" {
				errs.add("router config: %s scrapes over %s; the server speaks HTTP", n, p.Scheme)
			}
			if p.Path != "" && (p.Path != "/metrics" || !w.serves(p.Path)) {
				errs.add("router config: %s scrapes %s, not the server's /metrics", n, p.Path)
			}
		}
	}
	engine := vllmEngine
	for _, n := range ofType("core-metrics-extractor") {
		p, _ := params[n].(*metricsExtractorParams)
		if p == nil {
			continue
		}
		want := p.DefaultEngine
		if want == "" {
			want = "vllm"
		}
		found := want == "vllm"
		for _, ec := range p.EngineConfigs {
			if ec.Name == want {
				engine, found = ec, true
			}
		}
		if !found {
			errs.add("router config: %s's defaultEngine %q has no engineConfigs entry", n, want)
		}
	}
	gauge := func(what, spec string, labels ...string) {
		m := metricSpec.FindStringSubmatch(spec)
		switch {
		case spec == "":
			errs.add("router config: no metric for %s", what)
		case m == nil:
			errs.add("router config: %s metric %q is not name{labels}", what, spec)
		case w.Metrics[m[1]] != "gauge":
			errs.add("router config: %s metric %s: /metrics exports it as %q, want a gauge", what, m[1], w.Metrics[m[1]])
		default:
			for _, l := range labels {
				if !w.Labels[m[1]][l] {
					errs.add("router config: %s metric %s lacks the label %s the router reads", what, m[1], l)
				}
			}
		}
	}
	gauge("queued requests", engine.QueuedRequestsSpec)
	gauge("running requests", engine.RunningRequestsSpec)
	gauge("KV-cache usage", engine.KVUsageSpec)
	gauge("LoRA adapters", engine.LoRASpec, "max_lora", "running_lora_adapters", "waiting_lora_adapters")
	gauge("cache info", engine.CacheInfoSpec, or(engine.CacheBlockSizeLabelName, "block_size"), or(engine.CacheNumBlocksLabelName, "num_gpu_blocks"))

	// The data layer wires the extractor to the source.
	if dl := cfg.DataLayer; dl != nil {
		for _, s := range dl.Sources {
			if types[s.PluginRef] != "metrics-data-source" {
				errs.add("router config: data layer source %q is no metrics-data-source plugin", s.PluginRef)
			}
			for _, x := range s.Extractors {
				if types[x.PluginRef] != "core-metrics-extractor" {
					errs.add("router config: data layer extractor %q is no core-metrics-extractor plugin", x.PluginRef)
				}
			}
		}
	}

	// Scheduling: prefix and LoRA affinity scored.
	scored := map[string]bool{}
	for _, prof := range cfg.SchedulingProfiles {
		for _, pl := range prof.Plugins {
			typ, ok := types[pl.PluginRef]
			if !ok {
				errs.add("scheduling profile %s refers to plugin %q, which the config does not define", prof.Name, pl.PluginRef)
			}
			if strings.HasSuffix(typ, "-scorer") && (pl.Weight == nil || *pl.Weight <= 0) {
				errs.add("scheduling profile %s: scorer %s without a positive weight scores nothing", prof.Name, pl.PluginRef)
				continue
			}
			scored[typ] = true
		}
	}
	for _, want := range []string{"prefix-cache-scorer", "lora-affinity-scorer"} {
		if !scored[want] {
			errs.add("no scheduling profile uses the %s", want)
		}
	}
	return &cfg, errs
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkEPPAccess checks that the endpoint picker's ServiceAccount may watch
// its pool and the pods (and, for llm-d's router, its InferenceObjectives).
func checkEPPAccess(o *objects, epp *appsv1.Deployment, pool string, objectives bool) []error {
	var errs problems
	sa := epp.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		errs.add("endpoint picker runs as the default ServiceAccount")
		return errs
	}
	ok := false
	for _, s := range o.ServiceAccounts {
		ok = ok || s.Name == sa
	}
	if !ok {
		errs.add("ServiceAccount %s is not in the build", sa)
	}
	allowed := func(group, res string) bool {
		for _, rb := range o.RoleBindings {
			bound := false
			for _, s := range rb.Subjects {
				bound = bound || (s.Kind == "ServiceAccount" && s.Name == sa)
			}
			if !bound || rb.RoleRef.Kind != "Role" {
				continue
			}
			for _, r := range o.Roles {
				if r.Name != rb.RoleRef.Name {
					continue
				}
				for _, rule := range r.Rules {
					if contains(rule.APIGroups, group) && contains(rule.Resources, res) &&
						contains(rule.Verbs, "get") && contains(rule.Verbs, "list") && contains(rule.Verbs, "watch") {
						return true
					}
				}
			}
		}
		return false
	}
	if !allowed("", "pods") {
		errs.add("endpoint picker may not get/list/watch pods")
	}
	if !allowed("inference.networking.k8s.io", "inferencepools") {
		errs.add("endpoint picker may not get/list/watch inferencepools (%s)", pool)
	}
	if objectives && !allowed("llm-d.ai", "inferenceobjectives") {
		errs.add("endpoint picker may not get/list/watch llm-d.ai inferenceobjectives")
	}
	return errs
}
