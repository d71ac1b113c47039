package caddymodule

import "sync"

// A bridged call can outlive the configuration it started on: a reload
// keeps parked calls and calls in progress, which keep that configuration's
// options and logger. Its metrics, though, go to the newest configuration
// still loaded, whose registry Caddy serves at /metrics (each configuration
// has a registry of its own).

// loadedMetrics are the metrics of one loaded configuration.
type loadedMetrics struct {
	done <-chan struct{} // closed when the configuration is unloaded
	m    *gatewayMetrics
}

var liveMetrics struct {
	mu     sync.Mutex
	loaded []loadedMetrics // oldest first; unloaded ones pruned at each load
}

// loadMetrics records m as the metrics of a configuration loaded until
// done is closed.
func loadMetrics(done <-chan struct{}, m *gatewayMetrics) {
	liveMetrics.mu.Lock()
	defer liveMetrics.mu.Unlock()
	kept := liveMetrics.loaded[:0]
	for _, l := range liveMetrics.loaded {
		if !isClosed(l.done) {
			kept = append(kept, l)
		}
	}
	clear(liveMetrics.loaded[len(kept):])
	liveMetrics.loaded = append(kept, loadedMetrics{done: done, m: m})
}

// metricsFor returns m while its configuration (done) is loaded, and
// after that the metrics of the newest configuration still loaded.
func metricsFor(done <-chan struct{}, m *gatewayMetrics) *gatewayMetrics {
	if done == nil || !isClosed(done) {
		return m
	}
	liveMetrics.mu.Lock()
	defer liveMetrics.mu.Unlock()
	for i := len(liveMetrics.loaded) - 1; i >= 0; i-- {
		if l := liveMetrics.loaded[i]; !isClosed(l.done) {
			return l.m
		}
	}
	return m
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
