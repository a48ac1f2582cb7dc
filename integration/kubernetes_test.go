package integration

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/ilb-router/ilb/schemas"
)

// deploy/kubernetes cannot run here (no cluster), so these tests render
// every kustomization with the kustomize library kubectl uses, decode
// every object strictly into the k8s.io/api types (an unknown or
// misspelled field is an error), and check the wiring: selectors match
// pod labels, Service and probe ports are container ports that match the
// --http flag, the fleet ConfigMap's key is the --fleet file, mounted so
// that kubelet can update it in place, and that fleet is valid.

// k8sObjects is one rendered kustomization, decoded.
type k8sObjects struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	pdbs        []*policyv1.PodDisruptionBudget
	policies    []*networkingv1.NetworkPolicy
	namespaces  []*corev1.Namespace
}

// renderKustomization runs kustomize build on dir (relative to the repo).
func renderKustomization(t *testing.T, dir string) k8sObjects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), repoPath(dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out k8sObjects
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		if err := out.decode(r.GetKind(), b); err != nil {
			t.Errorf("%s: %s %s: %v", dir, r.GetKind(), r.GetName(), err)
		}
	}
	return out
}

// decode decodes one object strictly into its k8s.io/api type.
func (o *k8sObjects) decode(kind string, b []byte) error {
	strict := func(v any) error { return yaml.UnmarshalStrict(b, v) }
	var err error
	switch kind {
	case "Deployment":
		v := &appsv1.Deployment{}
		err, o.deployments = strict(v), append(o.deployments, v)
	case "Service":
		v := &corev1.Service{}
		err, o.services = strict(v), append(o.services, v)
	case "ConfigMap":
		v := &corev1.ConfigMap{}
		err, o.configMaps = strict(v), append(o.configMaps, v)
	case "Secret":
		v := &corev1.Secret{}
		err, o.secrets = strict(v), append(o.secrets, v)
	case "PodDisruptionBudget":
		v := &policyv1.PodDisruptionBudget{}
		err, o.pdbs = strict(v), append(o.pdbs, v)
	case "NetworkPolicy":
		v := &networkingv1.NetworkPolicy{}
		err, o.policies = strict(v), append(o.policies, v)
	case "Namespace":
		v := &corev1.Namespace{}
		err, o.namespaces = strict(v), append(o.namespaces, v)
	default:
		err = fmt.Errorf("kind %s: no k8s.io/api type checked here; add one", kind)
	}
	return err
}

func (o k8sObjects) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range o.deployments {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

func (o k8sObjects) configMap(name string) *corev1.ConfigMap {
	for _, c := range o.configMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestKubernetesManifests renders the base, the demo overlay and the
// broker policies and checks each.
func TestKubernetesManifests(t *testing.T) {
	for _, dir := range []string{"deploy/kubernetes/base", "deploy/kubernetes/overlays/demo"} {
		t.Run(path.Base(dir), func(t *testing.T) {
			o := renderKustomization(t, dir)
			for _, d := range o.deployments {
				checkDeployment(t, o, d)
			}
			checkServices(t, o)
			checkDisruptionBudgets(t, o)
			checkPolicies(t, o)
			checkControlPlane(t, o)
		})
	}
	t.Run("demo-wiring", func(t *testing.T) { checkDemo(t, renderKustomization(t, "deploy/kubernetes/overlays/demo")) })
	t.Run("brokers", func(t *testing.T) {
		o := renderKustomization(t, "deploy/kubernetes/brokers")
		ns := map[string]bool{}
		for _, p := range o.policies {
			ns[p.Namespace] = true
		}
		if len(o.policies) != 2 || !ns["kafka"] || !ns["nats"] {
			t.Errorf("broker policies: %d in namespaces %v, want one in kafka and one in nats", len(o.policies), ns)
		}
	})
}

// checkDeployment: selector matches the template, --http port is a named
// container port that both probes hit on /healthz, resources are
// requested, and --fleet is a key of a mounted ConfigMap (no subPath, so
// kubelet updates it in place) holding a valid fleet.
func checkDeployment(t *testing.T, o k8sObjects, d *appsv1.Deployment) {
	t.Helper()
	sel, err := metav1Selector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%s: selector %v does not match its pod labels %v (%v)", d.Name, d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		httpAddr, ok := flagValue(c.Args, "--http")
		if !ok {
			t.Errorf("%s/%s: no --http (probes and /metrics need it)", d.Name, c.Name)
			continue
		}
		port, err := strconv.Atoi(httpAddr[strings.LastIndex(httpAddr, ":")+1:])
		if err != nil {
			t.Errorf("%s/%s: --http %q has no port", d.Name, c.Name, httpAddr)
		}
		if i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" }); i < 0 || int(c.Ports[i].ContainerPort) != port {
			t.Errorf("%s/%s: container port \"http\" is not --http's %d: %+v", d.Name, c.Name, port, c.Ports)
		}
		for what, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "http" {
				t.Errorf("%s/%s: %s probe is not GET /healthz on port http: %+v", d.Name, c.Name, what, p)
			}
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s/%s: no cpu and memory requests", d.Name, c.Name)
		}
		checkFleetMount(t, o, d, c)
	}
}

func checkFleetMount(t *testing.T, o k8sObjects, d *appsv1.Deployment, c corev1.Container) {
	t.Helper()
	fleetPath, ok := flagValue(c.Args, "--fleet")
	if !ok {
		t.Errorf("%s/%s: no --fleet", d.Name, c.Name)
		return
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path.Dir(fleetPath) })
	if i < 0 {
		t.Errorf("%s/%s: nothing mounted at %s for --fleet %s", d.Name, c.Name, path.Dir(fleetPath), fleetPath)
		return
	}
	if c.VolumeMounts[i].SubPath != "" {
		t.Errorf("%s/%s: the fleet is mounted with subPath: kubelet never updates it, so no live reload", d.Name, c.Name)
	}
	vi := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	if vi < 0 || d.Spec.Template.Spec.Volumes[vi].ConfigMap == nil {
		t.Errorf("%s/%s: volume %s is not a ConfigMap", d.Name, c.Name, c.VolumeMounts[i].Name)
		return
	}
	cm := o.configMap(d.Spec.Template.Spec.Volumes[vi].ConfigMap.Name)
	if cm == nil {
		t.Errorf("%s: ConfigMap %s not in the kustomization", d.Name, d.Spec.Template.Spec.Volumes[vi].ConfigMap.Name)
		return
	}
	text, ok := cm.Data[path.Base(fleetPath)]
	if !ok {
		t.Errorf("%s: ConfigMap %s has no key %s (--fleet %s); keys %v", d.Name, cm.Name, path.Base(fleetPath), fleetPath, sortedKeys(cm.Data))
		return
	}
	fleet, err := schemas.ParseFleet([]byte(text))
	if err != nil {
		t.Errorf("ConfigMap %s: the fleet is invalid: %v", cm.Name, err)
		return
	}
	if cl, ok := flagValue(c.Args, "--cluster"); ok {
		if _, found := fleet.Cluster(cl); !found {
			t.Errorf("%s: --cluster %s is not a cluster of the fleet", d.Name, cl)
		}
	}
}

// checkServices: every Service selects some Deployment's pods, and its
// targetPort is one of their container ports.
func checkServices(t *testing.T, o k8sObjects) {
	t.Helper()
	for _, s := range o.services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		var pods []corev1.PodTemplateSpec
		for _, d := range o.deployments {
			if len(s.Spec.Selector) > 0 && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				pods = append(pods, d.Spec.Template)
			}
		}
		if len(pods) == 0 {
			t.Errorf("Service %s: selector %v matches no Deployment's pods", s.Name, s.Spec.Selector)
			continue
		}
		for _, p := range s.Spec.Ports {
			for _, pod := range pods {
				if _, ok := containerPort(pod, p.TargetPort.String()); !ok {
					t.Errorf("Service %s: targetPort %s is not a container port of its pods", s.Name, p.TargetPort.String())
				}
			}
		}
	}
}

// containerPort finds a named or numbered port among a pod's containers.
func containerPort(pod corev1.PodTemplateSpec, port string) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// checkDisruptionBudgets: each PDB selects one Deployment, and leaves
// room to evict one of its pods.
func checkDisruptionBudgets(t *testing.T, o k8sObjects) {
	t.Helper()
	for _, p := range o.pdbs {
		sel, err := metav1Selector(p.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range o.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				n++
				if p.Spec.MinAvailable != nil && p.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
					t.Errorf("PDB %s: minAvailable %s of %d replicas blocks every eviction", p.Name, p.Spec.MinAvailable, *d.Spec.Replicas)
				}
			}
		}
		if n != 1 {
			t.Errorf("PDB %s selects %d Deployments, want 1", p.Name, n)
		}
	}
	for _, name := range []string{"ilb-aggregator", "ilb-optimizer", "ilb-dataplane"} {
		if !slices.ContainsFunc(o.pdbs, func(p *policyv1.PodDisruptionBudget) bool { return p.Name == name }) {
			t.Errorf("no PodDisruptionBudget for %s", name)
		}
	}
}

// checkPolicies: every NetworkPolicy with a pod selector selects pods
// that exist, and named ports are container ports of those pods.
func checkPolicies(t *testing.T, o k8sObjects) {
	t.Helper()
	for _, p := range o.policies {
		sel, err := metav1Selector(&p.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		var pods []corev1.PodTemplateSpec
		for _, d := range o.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				pods = append(pods, d.Spec.Template)
			}
		}
		if len(pods) == 0 {
			t.Errorf("NetworkPolicy %s selects no pods", p.Name)
		}
		for _, rule := range p.Spec.Ingress {
			for _, port := range rule.Ports {
				for _, pod := range pods {
					if _, ok := containerPort(pod, port.Port.String()); !ok {
						t.Errorf("NetworkPolicy %s: port %s is not a container port of %s", p.Name, port.Port.String(), pod.Labels)
					}
				}
			}
		}
	}
}

// checkControlPlane: two optimizers, each with its own --id (the pod
// name); aggregator replicas share one consumer group.
func checkControlPlane(t *testing.T, o k8sObjects) {
	t.Helper()
	opt := o.deployment(t, "ilb-optimizer")
	c := opt.Spec.Template.Spec.Containers[0]
	id, _ := flagValue(c.Args, "--id")
	if *opt.Spec.Replicas != 2 || id != "$(POD_NAME)" ||
		!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		}) {
		t.Errorf("optimizer: %d replicas, --id %q; want 2, each --id its pod name", *opt.Spec.Replicas, id)
	}
	agg := o.deployment(t, "ilb-aggregator")
	if g, ok := flagValue(agg.Spec.Template.Spec.Containers[0].Args, "--group"); *agg.Spec.Replicas < 2 || ok && strings.Contains(g, "$(") {
		t.Errorf("aggregator: %d replicas, --group %q; want several in one group", *agg.Spec.Replicas, g)
	}
}

// checkDemo: the demo's engines are the engine simulator's, through its
// Service, and its Secret holds the NATS passwords the pods mount.
func checkDemo(t *testing.T, o k8sObjects) {
	t.Helper()
	fleet, err := schemas.ParseFleet([]byte(o.configMap("ilb-fleet").Data["fleet.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fleet.Engines {
		want := "http://ilb-engine-sim:8090/engines/" + e.Name
		if e.URL != want {
			t.Errorf("engine %s: url %q, want %q (the simulator's Service)", e.Name, e.URL, want)
		}
	}
	if o.deployment(t, "ilb-engine-sim") == nil || *o.deployment(t, "ilb-dataplane").Spec.Replicas != 2 {
		t.Error("demo: no engine simulator, or not 2 data planes")
	}
	if v, _ := flagValue(o.deployment(t, "ilb-optimizer").Spec.Template.Spec.Containers[0].Args, "--bucket-replicas"); v != "1" {
		t.Errorf("demo optimizer --bucket-replicas %q, want 1 (one NATS server)", v)
	}
	for _, d := range o.deployments {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret == nil {
				continue
			}
			i := slices.IndexFunc(o.secrets, func(s *corev1.Secret) bool { return s.Name == v.Secret.SecretName })
			if i < 0 {
				t.Errorf("%s mounts Secret %s, not in the demo", d.Name, v.Secret.SecretName)
				continue
			}
			for _, it := range v.Secret.Items {
				if _, ok := o.secrets[i].Data[it.Key]; !ok {
					t.Errorf("%s mounts key %s of Secret %s, which has no such key", d.Name, it.Key, v.Secret.SecretName)
				}
			}
		}
	}
	if len(o.namespaces) != 1 || o.deployments[0].Namespace != o.namespaces[0].Name {
		t.Errorf("demo: namespaces %d, objects in %q", len(o.namespaces), o.deployments[0].Namespace)
	}
}

// TestKubernetesFilesAreRendered: every YAML file under deploy/kubernetes
// is a kustomization, a resource some kustomization lists, a fleet file or
// Helm values (*-values.yaml), so no manifest escapes the checks above.
func TestKubernetesFilesAreRendered(t *testing.T) {
	root := repoPath("deploy/kubernetes")
	listed := map[string]bool{}
	var files []string
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		files = append(files, p)
		if e.Name() != "kustomization.yaml" {
			return nil
		}
		var k struct {
			Resources []string `json:"resources"`
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(b, &k); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, r := range k.Resources {
			listed[filepath.Join(filepath.Dir(p), r)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		base := filepath.Base(f)
		if base != "kustomization.yaml" && base != "fleet.yaml" && !strings.HasSuffix(base, "-values.yaml") && !listed[f] {
			t.Errorf("%s is in no kustomization's resources", f)
		}
	}
}

// metav1Selector converts a label selector.
func metav1Selector(s *metav1.LabelSelector) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(s)
}
