package integration

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Readers for the generic maps yaml.v3 decodes docker-compose.yml into.
// Compose allows several syntaxes for the same thing (environment as a map
// or a KEY=VALUE list, command as a string or a list, ports and volumes as
// short strings or long maps); these accept them all, so the structural
// tests do not break when the file switches between equivalent forms.

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// asString formats a YAML scalar (strings, numbers, booleans) as text.
func asString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

func asStrings(v any) []string {
	var out []string
	for _, x := range asList(v) {
		out = append(out, asString(x))
	}
	return out
}

// envOf returns a service's environment from either Compose syntax.
func envOf(svc map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range asMap(svc["environment"]) {
		out[k] = asString(v)
	}
	for _, kv := range asStrings(svc["environment"]) {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// commandOf returns a service's command as arguments. The string form is
// split on white space, which is what Compose does for simple commands.
func commandOf(svc map[string]any) []string {
	if s, ok := svc["command"].(string); ok {
		return strings.Fields(s)
	}
	return asStrings(svc["command"])
}

// flagValue finds `--name value` or `--name=value` in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// splitImage splits "repo[:tag]" (a registry host with a port is not used
// in this repository, so the last colon after the last slash is the tag).
func splitImage(image string) (repo, tag string) {
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:]
	}
	return image, ""
}

// parseVersionTag reads MAJOR.MINOR.PATCH from an image tag such as
// "2.12.15-alpine". Floating tags ("alpine", "2.12-alpine", "latest") are
// errors: a pinned version is the point.
func parseVersionTag(tag string) ([3]int, error) {
	var v [3]int
	num, _, _ := strings.Cut(tag, "-")
	parts := strings.Split(num, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("image tag %q does not pin MAJOR.MINOR.PATCH", tag)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("image tag %q: bad version number %q", tag, p)
		}
		v[i] = n
	}
	return v, nil
}

// natsVersionOK reports whether a nats-server release is free of the
// JetStream data-loss bugs Jepsen found (https://jepsen.io/analyses/nats-2.12.1):
// 2.10.20-2.10.22 lost streams after crashes (fixed in 2.10.23), and 2.12.3
// fixed peer-removal faults. Accepted: 2.10.23+ on the 2.10 line, 2.12.3+,
// and any later minor or major release. 2.11.x predates the 2.12.3 fixes.
func natsVersionOK(v [3]int) bool {
	major, minor, patch := v[0], v[1], v[2]
	switch {
	case major != 2:
		return major > 2
	case minor == 10:
		return patch >= 23
	case minor == 12:
		return patch >= 3
	default:
		return minor > 12
	}
}

// portBinding is one `ports` entry of a service.
type portBinding struct {
	hostIP, hostPort, containerPort string
}

// parsePort reads a ports entry: the short "[[IP:]HOST:]CONTAINER[/PROTO]"
// form (IPv6 in brackets) or the long map form. hostIP is "" when the
// entry binds every interface.
func parsePort(v any) (portBinding, error) {
	if m := asMap(v); m != nil {
		return portBinding{asString(m["host_ip"]), asString(m["published"]), asString(m["target"])}, nil
	}
	s, _ := v.(string)
	if s == "" {
		return portBinding{}, fmt.Errorf("port entry %v: want a string or a map", v)
	}
	s, _, _ = strings.Cut(s, "/")
	var ip string
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]:")
		if end < 0 {
			return portBinding{}, fmt.Errorf("port entry %q: unterminated IPv6 address", s)
		}
		ip, s = s[1:end], s[end+2:]
	}
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 1 && ip == "":
		return portBinding{containerPort: parts[0]}, nil
	case len(parts) == 2:
		return portBinding{ip, parts[0], parts[1]}, nil
	case len(parts) == 3 && ip == "":
		return portBinding{parts[0], parts[1], parts[2]}, nil
	}
	return portBinding{}, fmt.Errorf("port entry %q: cannot parse", v)
}

// mount is one `volumes` entry of a service.
type mount struct {
	source, target string
	bind           bool // source is a host path, else a named volume
}

// parseMount reads a volumes entry in the short "SOURCE:TARGET[:MODE]" or
// the long map form. Host paths are returned relative to the repository
// root ("./deploy/x" gives "deploy/x").
func parseMount(v any) (mount, error) {
	var m mount
	if lm := asMap(v); lm != nil {
		m = mount{asString(lm["source"]), asString(lm["target"]), asString(lm["type"]) == "bind"}
	} else {
		parts := strings.Split(asString(v), ":")
		if len(parts) < 2 || len(parts) > 3 {
			return m, fmt.Errorf("volume entry %q: want SOURCE:TARGET[:MODE]", v)
		}
		m.source, m.target = parts[0], parts[1]
		m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/")
	}
	if m.bind && strings.HasPrefix(m.source, "/") {
		return m, fmt.Errorf("volume entry %v: absolute host path; mount from the repository instead", v)
	}
	if m.bind {
		m.source = path.Clean(m.source)
		if m.source == ".." || strings.HasPrefix(m.source, "../") {
			return m, fmt.Errorf("volume entry %v: mounts from outside the repository", v)
		}
	}
	return m, nil
}

// hostPathOf maps a path inside svc's container to the repository path
// bind-mounted there (the mount itself or a file under a mounted folder).
func hostPathOf(svc map[string]any, containerPath string) (string, bool) {
	for _, v := range asList(svc["volumes"]) {
		m, err := parseMount(v)
		if err != nil || !m.bind {
			continue
		}
		if containerPath == m.target {
			return m.source, true
		}
		if rel, ok := strings.CutPrefix(containerPath, m.target+"/"); ok {
			return filepath.ToSlash(filepath.Join(m.source, rel)), true
		}
	}
	return "", false
}

func healthcheckRuns(svc map[string]any, word string) bool {
	for _, a := range asStrings(asMap(svc["healthcheck"])["test"]) {
		if strings.Contains(a, word) {
			return true
		}
	}
	return false
}

// dependsOn returns service -> condition; the short list form means
// service_started, which is what Compose does with it.
func dependsOn(svc map[string]any) map[string]string {
	out := map[string]string{}
	for _, d := range asList(svc["depends_on"]) {
		out[asString(d)] = "service_started"
	}
	for dep, v := range asMap(svc["depends_on"]) {
		out[dep] = asString(asMap(v)["condition"])
		if out[dep] == "" {
			out[dep] = "service_started"
		}
	}
	return out
}

func TestParsePort(t *testing.T) {
	tests := []struct {
		in      any
		want    portBinding
		wantErr bool
	}{
		{in: "127.0.0.1:8080:8080", want: portBinding{"127.0.0.1", "8080", "8080"}},
		{in: "127.0.0.1:8081:8080/tcp", want: portBinding{"127.0.0.1", "8081", "8080"}},
		{in: "8080:8080", want: portBinding{"", "8080", "8080"}},
		{in: "8080", want: portBinding{"", "", "8080"}},
		{in: "0.0.0.0:80:80", want: portBinding{"0.0.0.0", "80", "80"}},
		{in: "[::1]:80:8080", want: portBinding{"::1", "80", "8080"}},
		{in: "[::]:80:8080/udp", want: portBinding{"::", "80", "8080"}},
		{in: map[string]any{"target": 80, "published": "8080", "host_ip": "127.0.0.1"}, want: portBinding{"127.0.0.1", "8080", "80"}},
		{in: map[string]any{"target": 80, "published": 8080}, want: portBinding{"", "8080", "80"}},
		{in: "[::1:80:80", wantErr: true},
		{in: "1:2:3:4", wantErr: true},
		{in: 8080, wantErr: true},
	}
	for _, tt := range tests {
		got, err := parsePort(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parsePort(%v) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseMount(t *testing.T) {
	tests := []struct {
		in      any
		want    mount
		wantErr bool
	}{
		{in: "./deploy/nats/nats.conf:/etc/nats/ilb.conf:ro", want: mount{"deploy/nats/nats.conf", "/etc/nats/ilb.conf", true}},
		{in: "nats-data:/data", want: mount{"nats-data", "/data", false}},
		{in: ".:/src", want: mount{".", "/src", true}},
		{in: map[string]any{"type": "bind", "source": "./deploy/x", "target": "/x"}, want: mount{"deploy/x", "/x", true}},
		{in: map[string]any{"type": "volume", "source": "v", "target": "/v"}, want: mount{"v", "/v", false}},
		{in: "/etc/passwd:/etc/passwd:ro", wantErr: true},
		{in: "/data", wantErr: true},
		{in: "../shared:/shared", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseMount(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("parseMount(%v) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestNATSVersionOK(t *testing.T) {
	tests := []struct {
		tag  string
		want bool
	}{
		{"2.10.22-alpine", false}, // stream loss after crashes
		{"2.10.23-alpine", true},
		{"2.11.9", false},
		{"2.12.1-alpine", false}, // the release Jepsen tested
		{"2.12.2", false},
		{"2.12.3-alpine", true},
		{"2.12.15-alpine", true},
		{"2.14.5", true},
		{"3.0.0", true},
		{"1.4.1", false},
	}
	for _, tt := range tests {
		v, err := parseVersionTag(tt.tag)
		if err != nil {
			t.Fatalf("parseVersionTag(%q): %v", tt.tag, err)
		}
		if got := natsVersionOK(v); got != tt.want {
			t.Errorf("natsVersionOK(%s) = %v, want %v", tt.tag, got, tt.want)
		}
	}
	for _, floating := range []string{"alpine", "2.12-alpine", "latest", "2.x.1", ""} {
		if _, err := parseVersionTag(floating); err == nil {
			t.Errorf("parseVersionTag(%q) accepted a tag that pins no patch release", floating)
		}
	}
}

func TestSplitImage(t *testing.T) {
	tests := []struct{ in, repo, tag string }{
		{"nats:2.12.15-alpine", "nats", "2.12.15-alpine"},
		{"apache/kafka:4.1.0", "apache/kafka", "4.1.0"},
		{"gcr.io/distroless/static-debian12:nonroot", "gcr.io/distroless/static-debian12", "nonroot"},
		{"ilb", "ilb", ""},
	}
	for _, tt := range tests {
		if repo, tag := splitImage(tt.in); repo != tt.repo || tag != tt.tag {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tt.in, repo, tag, tt.repo, tt.tag)
		}
	}
}
