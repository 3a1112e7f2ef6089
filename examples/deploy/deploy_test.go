package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const (
	pull   = "k8s/components/model-pull"
	router = "k8s/components/llm-d-router"
	lwepp  = "k8s/components/gaie-lwepp"
)

var (
	cpu    = spec{Device: "cpu", ImageTag: "cpu"}
	nvidia = spec{Device: "webgpu", ImageTag: "gpu", GPU: true}
)

func with(s spec, f func(*spec)) spec { f(&s); return s }

// builds are the kustomizations a user can apply: the base, each overlay,
// and the overlays with the optional components added.
var builds = []struct {
	name       string
	dir        string
	components []string
	want       spec
}{
	{"base", "k8s/base", nil, cpu},
	{"cpu", "k8s/overlays/cpu", nil, cpu},
	{"nvidia", "k8s/overlays/nvidia", nil, nvidia},
	{"cpu+model-pull", "k8s/overlays/cpu", []string{pull}, with(cpu, func(s *spec) { s.Pull = true })},
	{"cpu+llm-d-router", "k8s/overlays/cpu", []string{router}, with(cpu, func(s *spec) { s.Router = "llm-d" })},
	{"cpu+gaie-lwepp", "k8s/overlays/cpu", []string{lwepp}, with(cpu, func(s *spec) { s.Router = "lwepp" })},
	{"nvidia+model-pull", "k8s/overlays/nvidia", []string{pull}, with(nvidia, func(s *spec) { s.Pull = true })},
	{"nvidia+model-pull+llm-d-router", "k8s/overlays/nvidia", []string{pull, router},
		with(nvidia, func(s *spec) { s.Pull, s.Router = true, "llm-d" })},
}

// build kustomizes and decodes one build.
func build(t *testing.T, dir string, components []string) *objects {
	t.Helper()
	d, opts := compose(t, dir, components)
	docs, err := kustomize(d, opts)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	o, err := decode(docs)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return o
}

// newWorld gathers what the checks compare the manifests with.
func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{ServeFlags: serveFlags(t)}
	w.Handler, w.Metrics, w.Labels = realServer(t)
	rules, err := adapterRules(build(t, "k8s/prometheus-adapter", nil))
	if err != nil {
		t.Fatal(err)
	}
	w.Rules = rules
	stages, errs := checkDockerfile(readDockerfile(t), goDirective(t))
	if stages == nil {
		t.Fatal(errs)
	}
	w.Stages = stages
	return w
}

func TestManifests(t *testing.T) {
	w := newWorld(t)
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			o := build(t, b.dir, b.components)
			for _, err := range check(o, w, b.want) {
				t.Error(err)
			}
		})
	}
}

// TestServerSide checks the facts the manifests rely on where the server
// states them, so that a change there shows up here: the probes' path
// answers 503 until Ready, the metrics the HPA and the endpoint picker
// read are gauges, and the adapter's rules expose the HPA's metric.
func TestServerSide(t *testing.T) {
	w := newWorld(t)
	for _, name := range []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
		"vllm:lora_requests_info", "vllm:cache_config_info"} {
		if w.Metrics[name] != "gauge" {
			t.Errorf("/metrics exports %s as %q, want gauge", name, w.Metrics[name])
		}
	}
	if w.serves("/healthz") {
		t.Error("the server answers /healthz: the path check cannot tell served from unserved paths")
	}
	exposed, errs := customMetrics(w.Rules, w.Metrics)
	for _, err := range errs {
		t.Error(err)
	}
	if exposed["tessera_requests_waiting"] != "vllm:num_requests_waiting" {
		t.Errorf("the adapter rules expose %v, want tessera_requests_waiting from vllm:num_requests_waiting", exposed)
	}
}

// TestStrictDecode: a misspelt field fails the build's decoding.
func TestStrictDecode(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"misspelt probe", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n      - name: x\n        readinesProbe: {}\n", "readinesProbe"},
		{"field at the wrong level", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nports: []\n", "ports"},
		{"unknown kind", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\n", "no Go type"},
		{"pool field", "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: x}\nspec:\n  targetPortNumber: 8080\n", "targetPortNumber"},
		{"the v1alpha2 pool", "apiVersion: inference.networking.x-k8s.io/v1alpha2\nkind: InferencePool\nmetadata: {name: x}\n", "no Go type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode([][]byte{[]byte(tc.doc)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode: %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// TestChecker breaks a correct build in one way at a time and expects the
// checks to find it: a checker that passes everything would pass
// TestManifests too.
func TestChecker(t *testing.T) {
	w := newWorld(t)
	server := func(o *objects) *corev1.Container {
		return &deployment(o, serverName).Spec.Template.Spec.Containers[0]
	}
	podSpec := func(o *objects) *corev1.PodSpec { return &deployment(o, serverName).Spec.Template.Spec }
	setArg := func(o *objects, prefix, arg string) {
		c := server(o)
		for i, a := range c.Args {
			if strings.HasPrefix(a, prefix) {
				c.Args[i] = arg
				return
			}
		}
		t.Fatalf("no arg %s", prefix)
	}
	setEnv := func(c *corev1.Container, name, value string) {
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i].Value = value
				return
			}
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
	full := with(nvidia, func(s *spec) { s.Pull, s.Router = true, "llm-d" })
	rt := with(cpu, func(s *spec) { s.Router = "llm-d" })
	lw := with(cpu, func(s *spec) { s.Router = "lwepp" })
	editConfig := func(o *objects, old, new string) {
		for _, cm := range o.ConfigMaps {
			for k, v := range cm.Data {
				if strings.Contains(v, old) {
					cm.Data[k] = strings.Replace(v, old, new, 1)
					return
				}
			}
		}
		t.Fatalf("no ConfigMap holds %q", old)
	}
	for _, tc := range []struct {
		name   string
		dir    string
		comps  []string
		want   spec
		break_ func(o *objects)
		error  string
	}{
		{"readiness on an unserved path", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			server(o).ReadinessProbe.HTTPGet.Path = "/healthz"
		}, "readinessProbe: GET /healthz"},
		{"liveness on another port", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			server(o).LivenessProbe.HTTPGet.Port = intstr.FromInt32(9090)
		}, "livenessProbe: port 9090"},
		{"liveness impatient with the drain", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			server(o).LivenessProbe.FailureThreshold = 3
		}, "within the drain"},
		{"no startup probe", "k8s/overlays/cpu", nil, cpu, func(o *objects) { server(o).StartupProbe = nil }, "startupProbe"},
		{"startup probe too short", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			server(o).StartupProbe.FailureThreshold = 6
		}, "for loading the model"},
		{"listening on loopback", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			setArg(o, "--addr=", "--addr=127.0.0.1:8080")
		}, "listen on 0.0.0.0"},
		{"listening on another port", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			setArg(o, "--addr=", "--addr=0.0.0.0:9000")
		}, "declares no port 9000"},
		{"a flag serve lacks", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			setArg(o, "--log=", "--log-format=json")
		}, "--log-format is not a flag"},
		{"an undefined variable", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			setArg(o, "--device=", "--device=$(DEVICE)")
		}, "$(DEVICE)"},
		{"grace shorter than the drain", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			g := int64(30)
			podSpec(o).TerminationGracePeriodSeconds = &g
		}, "terminationGracePeriodSeconds 30"},
		{"longer drain, same grace", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			setArg(o, "--drain-timeout=", "--drain-timeout=2m")
		}, "--drain-timeout 2m0s"},
		{"no preStop", "k8s/overlays/cpu", nil, cpu, func(o *objects) { server(o).Lifecycle = nil }, "no preStop sleep"},
		{"Service to the wrong port", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			o.Services[0].Spec.Ports[0].TargetPort = intstr.FromInt32(8081)
		}, "targets 8081"},
		{"Service selecting nothing", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			o.Services[0].Spec.Selector = map[string]string{"app": "other"}
		}, "selects the pods of 0"},
		{"HPA on a metric the adapter does not make", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			o.HPAs[0].Spec.Metrics[0].Pods.Metric.Name = "vllm_num_requests_waiting"
		}, "vllm_num_requests_waiting is not one"},
		{"HPA on another Deployment", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			o.HPAs[0].Spec.ScaleTargetRef.Name = "vllm"
		}, "not Deployment tessera"},
		{"replicas beside the HPA", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			n := int32(3)
			deployment(o, serverName).Spec.Replicas = &n
		}, "resets the HPA"},
		{"PDB blocking drains", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			z := intstr.FromInt32(0)
			o.PDBs[0].Spec.MaxUnavailable = &z
		}, "blocks every node drain"},
		{"scrape port wrong", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			deployment(o, serverName).Spec.Template.Annotations["prometheus.io/port"] = "9090"
		}, "prometheus.io/port"},
		{"root", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			u := int64(0)
			podSpec(o).SecurityContext.RunAsUser = &u
		}, "runAsUser"},
		{"RWO model claim", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			o.PVCs[0].Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}, "cannot all mount it"},
		{"model off the volume", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			setEnv(server(o), "TESSERA_MODEL", "m=/data/m.gguf")
		}, "on no volume"},
		{"GPU image on CPU", "k8s/overlays/cpu", nil, cpu, func(o *objects) {
			server(o).Image = "ghcr.io/tessera-llm/tessera:gpu"
		}, "want the cpu image"},
		{"no GPU", "k8s/overlays/nvidia", nil, nvidia, func(o *objects) {
			delete(server(o).Resources.Limits, gpuResource)
			delete(server(o).Resources.Requests, gpuResource)
		}, "nvidia.com/gpu = 0, want 1"},
		{"two GPUs", "k8s/overlays/nvidia", nil, nvidia, func(o *objects) {
			server(o).Resources.Limits[gpuResource] = resource.MustParse("2")
		}, "want 1"},
		{"CPU device on the GPU", "k8s/overlays/nvidia", nil, nvidia, func(o *objects) {
			setEnv(server(o), "TESSERA_DEVICE", "cpu")
		}, "--device=cpu, want webgpu"},
		{"no Vulkan capability", "k8s/overlays/nvidia", nil, nvidia, func(o *objects) {
			setEnv(server(o), "NVIDIA_DRIVER_CAPABILITIES", "compute,utility")
		}, "lacks graphics"},
		{"all GPUs visible", "k8s/overlays/nvidia", nil, nvidia, func(o *objects) {
			setEnv(server(o), "NVIDIA_VISIBLE_DEVICES", "all")
		}, "device plugin sets it"},
		{"pulling another model", "k8s/overlays/nvidia", []string{pull}, with(nvidia, func(s *spec) { s.Pull = true }), func(o *objects) {
			podSpec(o).InitContainers[0].Args[1] = "hf.co/other/model:Q4_0"
		}, "no init container runs tessera pull"},
		{"pulling into another cache", "k8s/overlays/nvidia", []string{pull}, with(nvidia, func(s *spec) { s.Pull = true }), func(o *objects) {
			setEnv(&podSpec(o).InitContainers[0], "TESSERA_CACHE", "/tmp/cache")
		}, "pulls into TESSERA_CACHE"},
		{"a volume with two sources", "k8s/overlays/cpu", []string{pull}, with(cpu, func(s *spec) { s.Pull = true }), func(o *objects) {
			podSpec(o).Volumes[0].PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "tessera-models"}
		}, "has 2 sources"},
		{"pool selecting other pods", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			o.Pools[0].Spec.Selector.MatchLabels = map[infv1.LabelKey]infv1.LabelValue{"app.kubernetes.io/name": "tessera-epp"}
		}, "selects the pods of tessera-epp too"},
		{"pool on another port", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			o.Pools[0].Spec.TargetPorts[0].Number = 8000
		}, "want [8080]"},
		{"pool without a picker", "k8s/overlays/cpu", []string{lwepp}, lw, func(o *objects) {
			o.Pools[0].Spec.EndpointPickerRef = nil
		}, "endpointPickerRef"},
		{"route to a Service", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			k := gwv1.Kind("Service")
			g := gwv1.Group("")
			o.Routes[0].Spec.Rules[0].BackendRefs[0].Kind, o.Routes[0].Spec.Rules[0].BackendRefs[0].Group = &k, &g
		}, "is not InferencePool tessera"},
		{"route timing out early", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			d := gwv1.Duration("15s")
			o.Routes[0].Spec.Rules[0].Timeouts.Request = &d
		}, "shorter than the server's --request-timeout"},
		{"the old picker's image", "k8s/overlays/nvidia", []string{pull, router}, full, func(o *objects) {
			deployment(o, "tessera-epp").Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/gateway-api-inference-extension/epp:v1.0.0"
		}, "want " + routerImage},
		{"the old picker's metric flag", "k8s/overlays/nvidia", []string{pull, router}, full, func(o *objects) {
			epp := &deployment(o, "tessera-epp").Spec.Template.Spec.Containers[0]
			epp.Args = append(epp.Args, "--total-queued-requests-metric=vllm:num_requests_waiting")
		}, "deprecated since llm-d-router v0.9"},
		{"a flag the router lacks", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			epp := &deployment(o, "tessera-epp").Spec.Template.Spec.Containers[0]
			epp.Args = append(epp.Args, "--kv-cache-usage-metric=vllm:kv_cache_usage_perc")
		}, "--kv-cache-usage-metric is not a flag of the endpoint picker"},
		{"picker for another pool", "k8s/overlays/cpu", []string{lwepp}, lw, func(o *objects) {
			epp := &deployment(o, "tessera-epp").Spec.Template.Spec.Containers[0]
			epp.Args[0] = "--pool-name=vllm"
		}, "--pool-name=\"vllm\""},
		{"picker in the default namespace", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			epp := &deployment(o, "tessera-epp").Spec.Template.Spec.Containers[0]
			epp.Args[1] = "--pool-namespace=default"
		}, "want the pod's namespace"},
		{"router config reading a metric Tessera lacks", "k8s/overlays/nvidia", []string{pull, router}, full, func(o *objects) {
			editConfig(o, "kvUsageSpec: vllm:kv_cache_usage_perc", "kvUsageSpec: vllm:gpu_cache_usage_perc")
		}, "vllm:gpu_cache_usage_perc"},
		{"router config naming an undefined plugin", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			editConfig(o, "pluginRef: prefix-cache-scorer", "pluginRef: prefix-scorer")
		}, "refers to plugin \"prefix-scorer\""},
		{"router config with the old prefix parameters", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			editConfig(o, "blockSizeTokens: 64", "hashBlockSize: 64")
		}, "hashBlockSize"},
		{"router config without the LoRA scorer", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			editConfig(o, "      - pluginRef: lora-affinity-scorer\n        weight: 1\n", "")
		}, "no scheduling profile uses the lora-affinity-scorer"},
		{"router config with the LoRA scorer weighing nothing", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			editConfig(o, "      - pluginRef: lora-affinity-scorer\n        weight: 1\n", "      - pluginRef: lora-affinity-scorer\n        weight: 0\n")
		}, "without a positive weight"},
		{"picker without pod access", "k8s/overlays/cpu", []string{router}, rt, func(o *objects) {
			o.Roles[0].Rules = o.Roles[0].Rules[:2]
		}, "may not get/list/watch pods"},
		{"picker ending before the pool", "k8s/overlays/cpu", []string{lwepp}, lw, func(o *objects) {
			g := int64(10)
			deployment(o, "tessera-epp").Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}, "grace period is shorter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := build(t, tc.dir, tc.comps)
			if errs := check(o, w, tc.want); len(errs) > 0 {
				t.Fatalf("the unbroken build fails: %v", errs)
			}
			tc.break_(o)
			expectError(t, check(o, w, tc.want), tc.error)
		})
	}
}

// TestAdapterRulesChecker breaks the prometheus-adapter rules.
func TestAdapterRulesChecker(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name   string
		break_ func(r *adapterRule)
		error  string
	}{
		{"a series Tessera lacks", func(r *adapterRule) {
			r.SeriesQuery = strings.Replace(r.SeriesQuery, "num_requests_waiting", "num_requests_queued", 1)
		}, "does not export"},
		{"a name with a colon", func(r *adapterRule) { r.Name.As = "vllm:waiting" }, "colons"},
		{"no pod resource", func(r *adapterRule) { delete(r.Resources.Overrides, "pod") }, "namespace and pod"},
		{"matches another name", func(r *adapterRule) { r.Name.Matches = "^vllm:waiting$" }, "does not match it"},
		{"no label matchers", func(r *adapterRule) { r.MetricsQuery = "sum(<<.Series>>) by (<<.GroupBy>>)" }, "<<.LabelMatchers>>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := build(t, "k8s/prometheus-adapter", nil)
			rs, err := adapterRules(rules)
			if err != nil {
				t.Fatal(err)
			}
			tc.break_(&rs[0])
			_, errs := customMetrics(rs, w.Metrics)
			expectError(t, errs, tc.error)
		})
	}
	// An HPA on a counter, through a rule the adapter would accept.
	o := build(t, "k8s/overlays/cpu", nil)
	rs := append([]adapterRule(nil), w.Rules...)
	r := rs[0]
	r.SeriesQuery = `vllm:prompt_tokens_total{namespace!="",pod!=""}`
	r.Name.Matches, r.Name.As = "^vllm:prompt_tokens_total$", "tessera_prompt_tokens"
	w2 := *w
	w2.Rules = append(rs, r)
	o.HPAs[0].Spec.Metrics[0].Pods.Metric.Name = "tessera_prompt_tokens"
	expectError(t, check(o, &w2, cpu), "a counter")
}

// TestRouterConfig: the router's configuration as shipped decodes
// strictly into llm-d-router v0.10.0's schema, schedules on LoRA affinity
// (a scorer with weight, reading vllm:lora_requests_info from /metrics)
// beside prefix affinity and load; and the v1.0 endpoint picker's
// configuration, which these manifests replaced, does not decode.
func TestRouterConfig(t *testing.T) {
	w := newWorld(t)
	data, err := os.ReadFile(filepath.Join(router, "epp-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, errs := checkRouterConfig(string(data), w)
	for _, err := range errs {
		t.Error(err)
	}
	if cfg == nil {
		t.FailNow()
	}
	weights := map[string]float64{}
	for _, p := range cfg.SchedulingProfiles[0].Plugins {
		if p.Weight != nil {
			weights[p.PluginRef] = *p.Weight
		}
	}
	for _, scorer := range []string{"lora-affinity-scorer", "prefix-cache-scorer", "queue-scorer", "kv-cache-utilization-scorer"} {
		if weights[scorer] <= 0 {
			t.Errorf("the default profile weighs %s %g, want it scoring", scorer, weights[scorer])
		}
	}
	if w.Metrics["vllm:lora_requests_info"] != "gauge" {
		t.Errorf("/metrics exports vllm:lora_requests_info as %q", w.Metrics["vllm:lora_requests_info"])
	}

	for _, tc := range []struct{ name, doc, want string }{
		{"v1.0 GAIE picker config", `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
  - type: queue-scorer
  - type: prefix-cache-scorer
    parameters:
      hashBlockSize: 64
      maxPrefixBlocksToMatch: 256
      lruCapacityPerServer: 1024
schedulingProfiles:
  - name: default
    plugins:
      - pluginRef: queue-scorer
        weight: 1
      - pluginRef: prefix-cache-scorer
        weight: 2
`, "hashBlockSize"},
		{"v1.0 apiVersion", "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins: []\nschedulingProfiles: []\n",
			"want llm-d.ai/v1alpha1"},
		{"a misspelt field", "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: []\nschedulingProfile: []\n", "schedulingProfile"},
		{"an unknown plugin", "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n  - type: lora-scorer\nschedulingProfiles: []\n",
			"\"lora-scorer\" is not one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := checkRouterConfig(tc.doc, w)
			expectError(t, errs, tc.want)
		})
	}
}
