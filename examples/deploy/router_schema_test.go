package deploy

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the manifests' endpoint pickers accept, pinned from their releases
// because no module proxy serves llm-d's router (github.com/llm-d/llm-d-router
// answers 403) and the Gateway API Inference Extension no longer ships the
// picker (its v1.6 keeps the InferencePool API, decoded with its own Go
// types in build_test.go, and a lightweight reference picker).

// routerImage is the llm-d router release the manifests deploy.
const routerImage = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"

// lweppImage is GAIE v1.6's lightweight picker, as its conformance suite
// (conformance/resources/base.yaml of v1.6.0) deploys it.
const lweppImage = "registry.k8s.io/gateway-api-inference-extension/lwepp:v1.6.0"

// EndpointPickerConfig mirrors the router's configuration file as
// llm-d-router v0.10.0 defines it (apix/config/v1alpha1,
// endpointpickerconfig_types.go: group llm-d.ai, version v1alpha1), field
// for field, so that a strict decode fails on any field that release does
// not have. The v1.0 GAIE file (inference.networking.x-k8s.io/v1alpha1,
// prefix parameters such as hashBlockSize) fails it.
type EndpointPickerConfig struct {
	metav1.TypeMeta    `json:",inline"`
	FeatureGates       []string                  `json:"featureGates,omitempty"`
	Plugins            []PluginSpec              `json:"plugins"`
	SchedulingProfiles []SchedulingProfile       `json:"schedulingProfiles"`
	DataLayer          *DataLayerConfig          `json:"dataLayer"`
	FlowControl        *json.RawMessage          `json:"flowControl,omitempty"` // not mirrored (unused here): any content passes
	RequestHandler     *RequestHandlerConfig     `json:"requestHandler,omitempty"`
	SaturationDetector *SaturationDetectorConfig `json:"saturationDetector,omitempty"` // deprecated in v0.10.0
	Parser             *ParserConfig             `json:"parser,omitempty"`             // deprecated in v0.10.0
}

type PluginSpec struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters"`
}

type SchedulingProfile struct {
	Name    string             `json:"name"`
	Plugins []SchedulingPlugin `json:"plugins"`
}

type SchedulingPlugin struct {
	PluginRef string   `json:"pluginRef"`
	Weight    *float64 `json:"weight"`
}

type DataLayerConfig struct {
	InjectDefaults              *bool             `json:"injectDefaults,omitempty"`
	Sources                     []DataLayerSource `json:"sources,omitempty"`
	Discovery                   *PluginRef        `json:"discovery,omitempty"`
	CrossReplicaSyncerPluginRef string            `json:"crossReplicaSyncerPluginRef,omitempty"`
	CrossReplicaSyncInterval    *metav1.Duration  `json:"crossReplicaSyncInterval,omitempty"`
}

type DataLayerSource struct {
	PluginRef  string      `json:"pluginRef"`
	Extractors []PluginRef `json:"extractors"`
}

type PluginRef struct {
	PluginRef string `json:"pluginRef"`
}

type RequestHandlerConfig struct {
	Parsers []ParserConfig `json:"parsers,omitempty"`
}

type ParserConfig = PluginRef

type SaturationDetectorConfig struct {
	PluginRef string `json:"pluginRef,omitempty"`
}

// The plugin types llm-d-router v0.10.0 registers (cmd/epp/runner's
// registerInTreePlugins) that a Tessera pool can use, with their
// parameters where they take any (nil: the factory reads none). The
// router decodes parameters strictly since v0.9 (unknown fields fail the
// plugin), as these do.
var routerPlugins = map[string]func() any{
	"queue-scorer":                 func() any { return nil },
	"kv-cache-utilization-scorer":  func() any { return nil },
	"lora-affinity-scorer":         func() any { return nil },
	"running-requests-size-scorer": func() any { return nil },
	"prefix-cache-scorer":          func() any { return new(prefixScorerParams) },
	"approx-prefix-cache-producer": func() any { return new(approxPrefixParams) },
	"metrics-data-source":          func() any { return new(metricsSourceParams) },
	"core-metrics-extractor":       func() any { return new(metricsExtractorParams) },
	"max-score-picker":             func() any { return nil },
	"random-picker":                func() any { return nil },
	"weighted-random-picker":       func() any { return nil },
	"single-profile-handler":       func() any { return nil },
}

// prefixScorerParams: scheduling/scorer/prefix Config.
type prefixScorerParams struct {
	PrefixMatchInfoProducerName string  `json:"prefixMatchInfoProducerName,omitempty"`
	MatchLengthWeight           float64 `json:"matchLengthWeight,omitempty"`
	MatchLengthScaleTokens      int     `json:"matchLengthScaleTokens,omitempty"`
}

// approxPrefixParams: requestcontrol/dataproducer/approximateprefix config.
type approxPrefixParams struct {
	AutoTune               *bool `json:"autoTune"`
	BlockSizeTokens        int   `json:"blockSizeTokens"`
	BlockSize              int   `json:"blockSize"` // deprecated: characters
	MaxPrefixBlocksToMatch int   `json:"maxPrefixBlocksToMatch"`
	MaxPrefixTokensToMatch int   `json:"maxPrefixTokensToMatch"`
	LRUCapacityPerServer   int   `json:"lruCapacityPerServer"`
}

// metricsSourceParams: datalayer/source/metrics.
type metricsSourceParams struct {
	Scheme             string `json:"scheme"`
	Path               string `json:"path"`
	Port               *int   `json:"port,omitempty"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify"`
	CACertPath         string `json:"caCertPath"`
	ClientCertPath     string `json:"clientCertPath"`
	ClientKeyPath      string `json:"clientKeyPath"`
	Interval           string `json:"interval"`
}

// metricsExtractorParams: datalayer/extractor/metrics
// modelServerExtractorParams, with the engine defaults it falls back to.
type metricsExtractorParams struct {
	EngineLabelKey string         `json:"engineLabelKey"`
	DefaultEngine  string         `json:"defaultEngine"`
	EngineConfigs  []engineConfig `json:"engineConfigs"`
}

type engineConfig struct {
	Name                    string `json:"name"`
	QueuedRequestsSpec      string `json:"queuedRequestsSpec"`
	RunningRequestsSpec     string `json:"runningRequestsSpec"`
	KVUsageSpec             string `json:"kvUsageSpec"`
	LoRASpec                string `json:"loraSpec"`
	CacheInfoSpec           string `json:"cacheInfoSpec"`
	CacheBlockSizeLabelName string `json:"cacheBlockSizeLabelName,omitempty"`
	CacheNumBlocksLabelName string `json:"cacheNumBlocksLabelName,omitempty"`
	CacheBlockSizeSpec      string `json:"cacheBlockSizeSpec,omitempty"`
	CacheNumBlocksSpec      string `json:"cacheNumBlocksSpec,omitempty"`
	CustomMetrics           []struct {
		AttributeKey string `json:"attributeKey"`
		MetricSpec   string `json:"metricSpec"`
	} `json:"customMetrics,omitempty"`
}

// vllmEngine is the extractor's built-in "vllm" engine, the default one.
var vllmEngine = engineConfig{Name: "vllm", QueuedRequestsSpec: "vllm:num_requests_waiting", RunningRequestsSpec: "vllm:num_requests_running",
	KVUsageSpec: "vllm:kv_cache_usage_perc", LoRASpec: "vllm:lora_requests_info", CacheInfoSpec: "vllm:cache_config_info"}

// routerFlags are the flags of llm-d-router v0.10.0's EPP (pkg/epp/server
// options.go, its logging options and controller-runtime's zap flags);
// true: boolean.
var routerFlags = map[string]bool{
	"grpc-port": false, "ha-enable-leader-election": true, "drain-timeout": false, "grpc-max-recv-msg-size": false,
	"grpc-max-send-msg-size": false, "pool-group": false, "pool-namespace": false, "pool-name": false,
	"endpoint-selector": false, "endpoint-target-ports": false, "disable-endpoint-subset-filter": true,
	"emit-endpoint-scores": true, "refresh-metrics-interval": false, "refresh-prometheus-metrics-interval": false,
	"metrics-staleness-threshold": false, "tracing": true, "health-checking": true, "metrics-port": false,
	"grpc-health-port": false, "enable-pprof": true, "cert-path": false, "enable-cert-reload": true,
	"enable-grpc-stream-metrics": true, "secure-serving": true, "tls-min-version": false, "tls-cipher-suites": false,
	"metrics-endpoint-auth": true, "metrics-client-ca-file": false, "metrics-cert-dir": false, "config-file": false,
	"config-text": false, "allow-experimental-plugins": true, "v": false,
	"zap-devel": true, "zap-encoder": false, "zap-log-level": false, "zap-stacktrace-level": false, "zap-time-encoding": false,
	// Deprecated in v0.10.0 for the extractor's engineConfigs: refused.
	"total-queued-requests-metric": false, "total-running-requests-metric": false, "kv-cache-usage-percentage-metric": false,
	"lora-info-metric": false, "cache-info-metric": false,
}

// deprecatedRouterFlags are flags v0.10.0 keeps but deprecates.
var deprecatedRouterFlags = []string{"total-queued-requests-metric", "total-running-requests-metric", "kv-cache-usage-percentage-metric",
	"lora-info-metric", "cache-info-metric"}

// lweppFlags are GAIE v1.6's lwepp flags (pkg/lwepp/server/options.go and
// controller-runtime's zap flags).
var lweppFlags = map[string]bool{
	"grpc-port": false, "pool-group": false, "pool-namespace": false, "pool-name": false, "metrics-port": false,
	"endpoint-target-ports": false, "grpc-health-port": false, "health-checking": true, "secure-serving": true,
	"zap-devel": true, "zap-encoder": false, "zap-log-level": false, "zap-stacktrace-level": false, "zap-time-encoding": false,
}
