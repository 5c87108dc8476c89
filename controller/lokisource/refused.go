package lokisource

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
)

// refusedError is Loki's 400 Bad Request for a query: retrying the same LogQL
// cannot help.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// refusal is a query's LogQL that Loki refuses.
type refusal struct {
	logql    string
	err      error
	fallback bool // the last accepted LogQL runs instead
}

// Health returns nil while Loki accepts every query, otherwise an error naming each
// refused query, its LogQL and Loki's answer.
func (s *Source) Health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.refused))
	for n := range s.refused {
		names = append(names, n)
	}
	slices.Sort(names)
	var errs []error
	for _, n := range names {
		r := s.refused[n]
		state := "not running"
		if r.fallback {
			state = "the last accepted LogQL runs instead"
		}
		errs = append(errs, fmt.Errorf("loki refuses query %q (%s): %w; LogQL: %s", n, state, r.err, r.logql))
	}
	return errors.Join(errs...)
}

// refuse records that Loki refused q and returns the LogQL to run instead ("" for
// none): the last LogQL of the query Loki accepted, if it is another one.
func (s *Source) refuse(log *slog.Logger, q Query, st *queryState, err error) string {
	st.mu.Lock()
	good := st.good
	st.mu.Unlock()
	if good == q.LogQL {
		good = ""
	}
	s.mu.Lock()
	s.refused[q.Name] = refusal{logql: q.LogQL, err: err, fallback: good != ""}
	s.mu.Unlock()
	s.m.Refused(q.Name, true)
	if good != "" {
		log.Error("Loki refused the query; the last accepted LogQL keeps running", "err", err, "logql", q.LogQL, "running", good)
	} else {
		log.Error("Loki refused the query and there is no accepted LogQL to run instead; this query stops until the rule packs change", "err", err, "logql", q.LogQL)
	}
	return good
}

// accepted records that Loki answered q with success.
func (s *Source) accepted(q Query, st *queryState) {
	st.mu.Lock()
	st.good = q.LogQL
	st.mu.Unlock()
	s.mu.Lock()
	r, ok := s.refused[q.Name]
	if ok && r.logql == q.LogQL {
		delete(s.refused, q.Name)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		// Also resets a gauge a previous Source (an earlier leadership) left set.
		s.m.Refused(q.Name, false)
	}
}

// clearRefusalLocked forgets a refusal of the query name (its LogQL changed or it
// was removed). s.mu must be held.
func (s *Source) clearRefusalLocked(name string) {
	if _, ok := s.refused[name]; ok {
		delete(s.refused, name)
		s.m.Refused(name, false)
	}
}
