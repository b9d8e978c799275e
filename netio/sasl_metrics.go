package netio

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// authMetrics counts SASL authentications by listener, mechanism and
// result ("success", "failure"). A mechanism a client names that is not
// enabled counts as a failure of mechanism "unsupported": the labels are
// the listeners' enabled mechanisms, never a client's words.
type authMetrics struct {
	total *prometheus.CounterVec // nil: not registered
}

// unsupportedMechanismLabel is the mechanism label of a handshake that
// named a mechanism not enabled.
const unsupportedMechanismLabel = "unsupported"

func newAuthMetrics(registerer prometheus.Registerer) (authMetrics, error) {
	if registerer == nil {
		return authMetrics{}, nil
	}
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mirrord_authentication_total",
		Help: "SASL authentications on the Kafka listeners, by listener, mechanism and result (success, failure).",
	}, []string{"listener", "mechanism", "result"})
	if err := registerer.Register(total); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return authMetrics{}, err
		}
		total = already.ExistingCollector.(*prometheus.CounterVec)
	}
	return authMetrics{total: total}, nil
}

func (m authMetrics) authenticated(listener, mechanism string, ok bool) {
	if m.total == nil {
		return
	}
	result := "failure"
	if ok {
		result = "success"
	}
	m.total.WithLabelValues(listener, mechanism, result).Inc()
}
