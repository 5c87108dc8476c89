package cri

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// DefaultPodLogRoot is where the kubelet keeps container logs.
const DefaultPodLogRoot = "/var/log/pods"

// ErrPodPath is wrapped by the errors of ParsePodLogPath.
var ErrPodPath = errors.New("not a pod log path")

// PodLog is what a container log file's path says about it:
// <root>/<namespace>_<pod>_<uid>/<container>/<restart>.log[.<suffix>].
type PodLog struct {
	Namespace string
	Pod       string
	UID       string
	Container string
	// Restart is the container's restart count, the number in the file
	// name.
	Restart int
	// Rotated is true for a file the kubelet rotated away
	// ("0.log.20240102-030405", possibly compressed ".gz"); Suffix holds
	// what follows ".log.".
	Rotated bool
	Suffix  string
}

// ParsePodLogPath decodes a container log file's path. Namespace and
// container must be DNS labels and the pod name a DNS subdomain, as the API
// server enforces; none of them can hold '_', which is what makes the
// directory name unambiguous.
func ParsePodLogPath(p string) (PodLog, error) {
	var l PodLog
	fail := func(why string) (PodLog, error) {
		return PodLog{}, fmt.Errorf("cri: %q: %w: %s", p, ErrPodPath, why)
	}
	clean := path.Clean(strings.ReplaceAll(p, "\\", "/"))
	parts := strings.Split(clean, "/")
	if len(parts) < 3 {
		return fail("want <namespace>_<pod>_<uid>/<container>/<n>.log")
	}
	dir, container, file := parts[len(parts)-3], parts[len(parts)-2], parts[len(parts)-1]

	ids := strings.Split(dir, "_")
	if len(ids) != 3 {
		return fail("directory is not <namespace>_<pod>_<uid>")
	}
	l.Namespace, l.Pod, l.UID, l.Container = ids[0], ids[1], ids[2], container
	switch {
	case !isDNSLabel(l.Namespace):
		return fail("namespace is not a DNS label")
	case !isDNSSubdomain(l.Pod):
		return fail("pod name is not a DNS subdomain")
	case !isUID(l.UID):
		return fail("bad pod uid")
	case !isDNSLabel(l.Container):
		return fail("container name is not a DNS label")
	}

	num, rest, found := strings.Cut(file, ".log")
	if !found || num == "" {
		return fail("file name is not <n>.log")
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		return fail("file name is not <n>.log")
	}
	l.Restart = n
	switch {
	case rest == "":
	case strings.HasPrefix(rest, ".") && len(rest) > 1:
		l.Rotated, l.Suffix = true, rest[1:]
	default:
		return fail("file name is not <n>.log")
	}
	return l, nil
}

func isDNSLabel(s string) bool { return len(s) <= 63 && isLabel(s) }

// isLabel checks the RFC 1123 label syntax (lower-case letters, digits and
// inner '-') without a length limit.
func isLabel(s string) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if !isLabel(label) {
			return false
		}
	}
	return true
}

// isUID accepts a UUID or a static pod's config hash: letters, digits and
// '-', at most 64 bytes.
func isUID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
