package cri

// What only the tests read: the reassembler's counters and state, and the
// writing of CRI lines and pod paths that parsing is checked against.

import "time"

// ReassemblerStats are a reassembler's running counters.
type ReassemblerStats = reassemblerCounts

// Stats returns the running counters.
func (r *Reassembler) Stats() ReassemblerStats { return r.stats }

// Pending reports whether an unfinished line is held for any stream.
func (r *Reassembler) Pending() bool { return r.streams[0].active || r.streams[1].active }

// AppendFormat appends e to dst as a CRI log line, newline included. The
// timestamp is written with time.RFC3339Nano in e.Time's location; when
// Tags is empty, "P" or "F" is written according to Partial.
func (e *Entry) AppendFormat(dst []byte) []byte {
	dst = e.Time.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, ' ')
	dst = append(dst, e.Stream...)
	dst = append(dst, ' ')
	switch {
	case e.Tags != "":
		dst = append(dst, e.Tags...)
	case e.Partial:
		dst = append(dst, TagPartial...)
	default:
		dst = append(dst, TagFull...)
	}
	dst = append(dst, ' ')
	dst = append(dst, e.Message...)
	return append(dst, '\n')
}

// ParsePodPath returns the namespace, pod name, pod uid and container name
// encoded in the path of a container log file under /var/log/pods (or any
// other root: only the last three path elements are read).
func ParsePodPath(p string) (namespace, pod, uid, container string, err error) {
	l, err := ParsePodLogPath(p)
	if err != nil {
		return "", "", "", "", err
	}
	return l.Namespace, l.Pod, l.UID, l.Container, nil
}
