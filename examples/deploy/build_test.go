// Package deploy holds Tessera's container image and Kubernetes manifests
// (see docs/SCALING.md); its tests build every kustomization, decode each
// object strictly into its Go API type and check the manifests against
// the server they deploy.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// objects are the decoded output of one kustomize build.
type objects struct {
	Deployments     []*appsv1.Deployment
	Services        []*corev1.Service
	PVCs            []*corev1.PersistentVolumeClaim
	ConfigMaps      []*corev1.ConfigMap
	ServiceAccounts []*corev1.ServiceAccount
	PDBs            []*policyv1.PodDisruptionBudget
	HPAs            []*autoscalingv2.HorizontalPodAutoscaler
	Roles           []*rbacv1.Role
	RoleBindings    []*rbacv1.RoleBinding
	// The inference extension's InferencePool, from its own module
	// (sigs.k8s.io/gateway-api-inference-extension v1.0.0, api/v1).
	Pools  []*infv1.InferencePool
	Routes []*gwv1.HTTPRoute
}

// kustomize builds the kustomization in dir with kustomize's Go API, as
// `kubectl apply -k` does, and returns each object's YAML.
func kustomize(dir string, opts krusty.Options) ([][]byte, error) {
	k := krusty.MakeKustomizer(&opts)
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", r.CurId(), err)
		}
		docs = append(docs, y)
	}
	return docs, nil
}

// compose returns a copy of the overlay in dir, written to a temporary
// directory, with components added, as a user adds them by uncommenting
// `components:` in the overlay: the overlay's own transformers (images,
// patches) then apply to what the components add too, which they would
// not if the components wrapped the built overlay from outside.
func compose(t *testing.T, dir string, components []string) (string, krusty.Options) {
	t.Helper()
	opts := *krusty.MakeDefaultOptions()
	if len(components) == 0 {
		return dir, opts
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := strictInto(data, &k); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if len(k.Components) > 0 || len(k.ConfigMapGenerator) > 0 || len(k.SecretGenerator) > 0 {
		t.Fatalf("%s: compose rewrites the paths of resources and patches only", dir)
	}
	tmp := t.TempDir()
	// Kustomize takes no absolute paths: name them from the copy, which
	// then reads files outside its own directory.
	rel := func(p string) string {
		a, err := filepath.Abs(filepath.Join(dir, p))
		if err == nil {
			p, err = filepath.Rel(tmp, a)
		}
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(p)
	}
	for i, r := range k.Resources {
		k.Resources[i] = rel(r)
	}
	for i := range k.Patches {
		if k.Patches[i].Path != "" {
			k.Patches[i].Path = rel(k.Patches[i].Path)
		}
	}
	for _, c := range components {
		a, err := filepath.Abs(c)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(tmp, a)
		if err != nil {
			t.Fatal(err)
		}
		k.Components = append(k.Components, filepath.ToSlash(r))
	}
	out, err := yaml.Marshal(&k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	opts.LoadRestrictions = types.LoadRestrictionsNone
	return tmp, opts
}

// decode turns the YAML of a build into typed objects. Every kind must be
// one this test knows, and every field one its Go type has: a misspelt
// field (readinesProbe) or one at the wrong level is an error, where
// `kubectl apply` would warn at most and drop it.
func decode(docs [][]byte) (*objects, error) {
	o := &objects{}
	for _, doc := range docs {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, err
		}
		id := tm.APIVersion + " " + tm.Kind + " " + tm.Metadata.Name
		var err error
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			o.Deployments, err = appendStrict(o.Deployments, doc)
		case "v1 Service":
			o.Services, err = appendStrict(o.Services, doc)
		case "v1 PersistentVolumeClaim":
			o.PVCs, err = appendStrict(o.PVCs, doc)
		case "v1 ConfigMap":
			o.ConfigMaps, err = appendStrict(o.ConfigMaps, doc)
		case "v1 ServiceAccount":
			o.ServiceAccounts, err = appendStrict(o.ServiceAccounts, doc)
		case "policy/v1 PodDisruptionBudget":
			o.PDBs, err = appendStrict(o.PDBs, doc)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			o.HPAs, err = appendStrict(o.HPAs, doc)
		case "rbac.authorization.k8s.io/v1 Role":
			o.Roles, err = appendStrict(o.Roles, doc)
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			o.RoleBindings, err = appendStrict(o.RoleBindings, doc)
		case "inference.networking.k8s.io/v1 InferencePool":
			o.Pools, err = appendStrict(o.Pools, doc)
		case "gateway.networking.k8s.io/v1 HTTPRoute":
			o.Routes, err = appendStrict(o.Routes, doc)
		default:
			err = fmt.Errorf("no Go type for this kind in the test")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", id, err)
		}
	}
	return o, nil
}

// appendStrict decodes doc into a new T, failing on unknown and duplicate
// fields (sigs.k8s.io/yaml: YAML to JSON, then a decoder that disallows
// unknown fields), and appends it.
func appendStrict[T any](list []*T, doc []byte) ([]*T, error) {
	v := new(T)
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		return list, err
	}
	return append(list, v), nil
}

// strictInto decodes YAML into v, failing on unknown fields.
func strictInto(doc []byte, v any) error {
	return yaml.UnmarshalStrict(bytes.TrimSpace(doc), v)
}
