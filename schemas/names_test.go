package schemas

import (
	"strings"
	"testing"
)

func TestClusterKey(t *testing.T) {
	cases := []struct{ name, want string }{
		{"fe-east", ""},
		{"fe_east/eu=1.a", ""},
		{"A.b.C", ""},
		{strings.Repeat("a", MaxNameLen), ""},
		{"", "cluster name is empty"},
		{strings.Repeat("a", MaxNameLen+1), "cluster name is 257 bytes"},
		{"manifest", `cluster name "manifest" is reserved`},
		{".fe", "starts or ends with '.'"},
		{"fe.", "starts or ends with '.'"},
		{"fe..east", `empty token ("..")`},
		{"fe east", `contains ' '`},
		{"fe*", `contains '*'`},
		{"fe>", `contains '>'`},
		{"fé", `contains 'é'`},
		{"fe\xff", "contains '\ufffd'"},
	}
	for _, tc := range cases {
		key, err := ClusterKey(tc.name)
		if tc.want == "" {
			if err != nil || key != tc.name {
				t.Errorf("ClusterKey(%q) = %q, %v", tc.name, key, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || key != "" {
			t.Errorf("ClusterKey(%q) = %q, %v; want error containing %q", tc.name, key, err, tc.want)
		}
	}
}

func TestDefaultNamesValid(t *testing.T) {
	for _, topic := range []string{TopicSignals, TopicSignalsDLQ, TopicFeatures} {
		if err := ValidTopicName(topic); err != nil {
			t.Errorf("default topic: %v", err)
		}
	}
	if err := ValidBucketName(BucketWeights); err != nil {
		t.Errorf("default bucket: %v", err)
	}
	if err := validKVKey(ManifestKey); err != nil {
		t.Errorf("manifest key: %v", err)
	}
	for _, bad := range []string{"", "a.b", "a b", "a/b", "a=b"} {
		if ValidBucketName(bad) == nil {
			t.Errorf("bucket name %q accepted", bad)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("t", 250)} {
		if ValidTopicName(bad) == nil {
			t.Errorf("topic name %q accepted", bad)
		}
	}
}

func TestWindowIDRoundTrip(t *testing.T) {
	id := WindowID{Partition: 3, Start: 1795989610000000000, End: 1795989620000000000}
	if s := id.String(); s != "3/1795989610000000000/1795989620000000000" {
		t.Fatalf("String() = %q", s)
	}
	got, err := ParseWindowID(id.String())
	if err != nil || got != id {
		t.Fatalf("ParseWindowID(%q) = %+v, %v", id.String(), got, err)
	}
	for _, bad := range []string{"", "3", "3/1", "-1/1/2", "x/1/2", "3/1/y", "3/1/2/4"} {
		if _, err := ParseWindowID(bad); err == nil {
			t.Errorf("ParseWindowID(%q) accepted", bad)
		}
	}
}
