package cri

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePodPath(t *testing.T) {
	tests := []struct {
		path string
		want PodLog
	}{
		{"/var/log/pods/default_trainer-0_5b7c3f2e-1d2a-4b9e-8f3c-0a1b2c3d4e5f/pytorch/0.log",
			PodLog{Namespace: "default", Pod: "trainer-0", UID: "5b7c3f2e-1d2a-4b9e-8f3c-0a1b2c3d4e5f", Container: "pytorch"}},
		{"/var/log/pods/ml-team_llama.finetune-worker-3_9d2f/nccl-tests/12.log",
			PodLog{Namespace: "ml-team", Pod: "llama.finetune-worker-3", UID: "9d2f", Container: "nccl-tests", Restart: 12}},
		{"/var/log/pods/kube-system_kube-apiserver-node1_0123456789abcdef0123456789abcdef/kube-apiserver/3.log.20240102-030405",
			PodLog{Namespace: "kube-system", Pod: "kube-apiserver-node1", UID: "0123456789abcdef0123456789abcdef", Container: "kube-apiserver", Restart: 3, Rotated: true, Suffix: "20240102-030405"}},
		{"/var/log/pods/a_b_c/d/0.log.20240102-030405.gz",
			PodLog{Namespace: "a", Pod: "b", UID: "c", Container: "d", Rotated: true, Suffix: "20240102-030405.gz"}},
		{"relative/ns_pod_uid/ctr/1.log",
			PodLog{Namespace: "ns", Pod: "pod", UID: "uid", Container: "ctr", Restart: 1}},
		{"ns_pod_uid/ctr/1.log", PodLog{Namespace: "ns", Pod: "pod", UID: "uid", Container: "ctr", Restart: 1}},
		{"/var/log/pods//ns_pod_uid/./ctr/1.log", PodLog{Namespace: "ns", Pod: "pod", UID: "uid", Container: "ctr", Restart: 1}},
		{`C:\var\log\pods\ns_pod_uid\ctr\2.log`, PodLog{Namespace: "ns", Pod: "pod", UID: "uid", Container: "ctr", Restart: 2}},
		{"/var/log/pods/ns_" + strings.Repeat("p", 70) + "_u/c/0.log", PodLog{Namespace: "ns", Pod: strings.Repeat("p", 70), UID: "u", Container: "c"}},
	}
	for _, tc := range tests {
		got, err := ParsePodLogPath(tc.path)
		if err != nil || got != tc.want {
			t.Errorf("ParsePodLogPath(%q) = %+v, %v; want %+v", tc.path, got, err, tc.want)
		}
		ns, pod, uid, ctr, err := ParsePodPath(tc.path)
		if err != nil || ns != tc.want.Namespace || pod != tc.want.Pod || uid != tc.want.UID || ctr != tc.want.Container {
			t.Errorf("ParsePodPath(%q) = %q %q %q %q, %v", tc.path, ns, pod, uid, ctr, err)
		}
	}
}

func TestParsePodPathErrors(t *testing.T) {
	for _, p := range []string{
		"",
		"0.log",
		"ctr/0.log",
		"/var/log/pods/ns_pod/ctr/0.log", // no uid
		"/var/log/pods/ns_pod_uid_extra/ctr/0.log",                        // ambiguous
		"/var/log/pods/ns__uid/ctr/0.log",                                 // empty pod
		"/var/log/pods/NS_pod_uid/ctr/0.log",                              // upper case namespace
		"/var/log/pods/ns_pod-_uid/ctr/0.log",                             // label ends with '-'
		"/var/log/pods/ns_pod..x_uid/ctr/0.log",                           // empty label
		"/var/log/pods/ns_pod_u!d/ctr/0.log",                              // bad uid
		"/var/log/pods/ns_pod_uid/Ctr/0.log",                              // bad container
		"/var/log/pods/ns_pod_uid/ctr/x.log",                              // not a number
		"/var/log/pods/ns_pod_uid/ctr/-1.log",                             // negative
		"/var/log/pods/ns_pod_uid/ctr/01.log",                             // not canonical
		"/var/log/pods/ns_pod_uid/ctr/0.txt",                              // not .log
		"/var/log/pods/ns_pod_uid/ctr/0.logx",                             // not .log
		"/var/log/pods/ns_pod_uid/ctr/0.log.",                             // empty suffix
		"/var/log/pods/ns_pod_uid/ctr/",                                   // a directory
		"/var/log/containers/pod_ns_ctr-0123abcd.log",                     // the symlink farm
		"/var/log/pods/" + strings.Repeat("n", 64) + "_pod_uid/ctr/0.log", // namespace too long
	} {
		if l, err := ParsePodLogPath(p); !errors.Is(err, ErrPodPath) {
			t.Errorf("ParsePodLogPath(%q) = %+v, %v; want ErrPodPath", p, l, err)
		}
		if _, _, _, _, err := ParsePodPath(p); !errors.Is(err, ErrPodPath) {
			t.Errorf("ParsePodPath(%q): %v", p, err)
		}
	}
}
