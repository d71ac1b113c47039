package caddymodule

import "testing"

// TestMetricsFor: a call's metrics are its configuration's while it is
// loaded, then the newest loaded configuration's; a configuration that
// failed to load (its context ended) is skipped.
func TestMetricsFor(t *testing.T) {
	old, cur, failed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	mOld, mCur, mFailed := &gatewayMetrics{}, &gatewayMetrics{}, &gatewayMetrics{}
	loadMetrics(old, mOld)
	loadMetrics(cur, mCur)
	if got := metricsFor(old, mOld); got != mOld {
		t.Fatal("a loaded configuration's call is not counted in its metrics")
	}
	loadMetrics(failed, mFailed)
	close(failed)
	close(old) // reloaded
	if got := metricsFor(old, mOld); got != mCur {
		t.Fatal("after a reload, a call of the old configuration is not counted in the current one")
	}
	close(cur) // stopping: nothing is loaded
	if got := metricsFor(old, mOld); got != mOld {
		t.Fatal("with nothing loaded, a call is not counted in its own metrics")
	}
	loadMetrics(make(chan struct{}), &gatewayMetrics{})
	liveMetrics.mu.Lock()
	defer liveMetrics.mu.Unlock()
	for _, l := range liveMetrics.loaded {
		if isClosed(l.done) {
			t.Fatal("an unloaded configuration is still remembered after a load")
		}
	}
}
