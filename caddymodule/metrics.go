package caddymodule

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
)

// The gateway's Prometheus series, registered on the registry of each
// loaded configuration (Caddy serves it at the admin endpoint's /metrics).
// Labels are bounded: cells, outcomes and reasons are fixed sets, methods
// are the known MCP methods (others count as "other"), and upstreams are
// the configured URLs. Counters start again at zero when a configuration
// is loaded; gauges read the process-wide state.
const metricsNamespace, metricsSubsystem = "caddy", "mcp_gateway"

// gatewayMetrics holds the collectors of one configuration. A nil
// *gatewayMetrics records nothing.
type gatewayMetrics struct {
	requests       *prometheus.CounterVec   // cell, method, outcome
	calls          *prometheus.CounterVec   // cell, method, outcome
	rounds         *prometheus.HistogramVec // cell
	overhead       *prometheus.HistogramVec // cell
	parkedEnded    *prometheus.CounterVec   // reason
	forwards       *prometheus.CounterVec   // direction, outcome
	leftOut        *prometheus.CounterVec   // server, method
	serverRequests *prometheus.CounterVec   // server, method, outcome
	checks         *prometheus.CounterVec   // upstream, result
	tasksMade      prometheus.Counter       //
	tasksEnded     *prometheus.CounterVec   // status
	resumable      *prometheus.CounterVec   // event
	taskStore      *prometheus.CounterVec   // event
	quirks         *prometheus.CounterVec   // repair
}

// newGatewayMetrics registers the collectors on reg, or takes those another
// handler of the same configuration registered.
func newGatewayMetrics(reg *prometheus.Registry) *gatewayMetrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return registerOrExisting(reg, prometheus.NewCounterVec(prometheus.CounterOpts(opts(name, help)), labels))
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		o := opts(name, help)
		return registerOrExisting(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: o.Namespace, Subsystem: o.Subsystem, Name: o.Name, Help: o.Help, Buckets: buckets,
		}, labels))
	}
	m := &gatewayMetrics{
		requests: counter("requests_total",
			"Client requests served, by cell (client era-upstream era), JSON-RPC method and outcome.", "cell", "method", "outcome"),
		serverRequests: counter("server_requests_total",
			"Client requests a federated block routed to one of its servers, by server, JSON-RPC method and outcome (merged answers are not counted here: see federation_left_out_total).", "server", "method", "outcome"),
		calls: counter("bridged_calls_total",
			"Bridged calls that ended, by cell, method and outcome; a forward-bridged call spans all its rounds.", "cell", "method", "outcome"),
		rounds: histogram("call_rounds",
			"Input rounds per bridged call.", []float64{0, 1, 2, 3, 4, 6, 8, 12, 16}, "cell"),
		overhead: histogram("translation_overhead_seconds",
			"Time per bridged call the gateway spent translating messages (state sealing, input requests, result reshaping), not waiting.",
			prometheus.ExponentialBuckets(0.00001, 2.5, 12), "cell"),
		parkedEnded: counter("parked_calls_ended_total",
			"Parked calls that left the parked list, by reason: answered, expired, cancelled, failed; and calls refused a place (max_parked, max_parked_per_principal): refused.", "reason"),
		forwards: counter("instance_forwards_total",
			"Requests forwarded between gateway instances, by direction (sent, received) and outcome (ok, error).", "direction", "outcome"),
		leftOut: counter("federation_left_out_total",
			"Servers of a federated block left out of a merged answer (a listing, server/discover, a claim of resources), by server and method: they failed, answered an error, or did not answer within list_timeout.", "server", "method"),
		checks: counter("health_checks_total",
			"Active health checks of upstreams, by upstream and result (healthy, unhealthy).", "upstream", "result"),
		tasksMade: registerOrExisting(reg, prometheus.NewCounter(prometheus.CounterOpts(opts("tasks_created_total",
			"Tasks the forward bridge created for legacy tools (the Tasks extension).")))),
		tasksEnded: counter("tasks_ended_total",
			"Tasks of the forward bridge that reached a terminal status, by status: completed, failed, cancelled.", "status"),
		resumable: counter("resumable_calls_total",
			"Forward-bridge calls parked holding no stream (resume on), by event: parked, resumed (by a retry on this instance), lingered (of those resumed, read on from the call's stream, still open: resume_linger), gone (the upstream no longer knew the call); for a state parked here that expired with no retry here: ended (this instance cancelled the call and ended its upstream session), left (left to the upstream: the call went on elsewhere, or it could not tell); finished_elsewhere (a state parked here whose call ended on another instance gave its place back: that instance gave the session back, or it was found gone); given_back (a call resumed here from a state another instance parked ended here, and its session went back to that instance).", "event"),
		taskStore: counter("task_store_events_total",
			"Events of the records of the forward bridge's tasks in Caddy's storage (task_store), by event: store_failed (a record could not be written or deleted; the task went on in memory), taken_over (this instance took over a task whose owner's lease lapsed, its call resumed), lost (a task whose owner was lost failed here, its call not resumable).", "event"),
		quirks: counter("client_quirks_repaired_total",
			"Requests whose headers the gateway repaired for a client known to get them wrong (accept_client_quirks), by repair: protocol_header_mismatch, missing_method_header.", "repair"),
	}
	registerOrExisting(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("parked_calls",
		"Calls parked at input_required holding their stream, waiting for the client's retry (those parked holding nothing are resumable_parked_calls; /mcp_gateway/parked lists both).")), bridgesSum((*forward.Bridge).Parked)))
	registerOrExisting(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("resumable_parked_calls",
		"Calls parked holding no stream (resume on) whose requestState has not expired nor been used on this instance, and whose upstream session still lives: each keeps it open.")), bridgesSum((*forward.Bridge).Places)))
	registerOrExisting(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("inline_requests_waiting",
		"Reverse bridge: in-line requests sent to legacy clients and waiting for their answer.")), waitingCount))
	registerOrExisting[prometheus.Collector](reg, upstreamCollector{})
	registerOrExisting[prometheus.Collector](reg, taskCollector{})
	return m
}

// registerOrExisting registers c on reg, or returns the collector already
// registered under the same descriptors (another handler of the same
// configuration). Any other failure leaves c unregistered: recording into it
// is harmless.
func registerOrExisting[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// request counts one client request.
func (m *gatewayMetrics) request(cell, method, outcome, server string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(cell, methodLabel(method), outcome).Inc()
	if server != "" {
		m.serverRequests.WithLabelValues(server, methodLabel(method), outcome).Inc()
	}
}

// callEnded records a bridged call that ended.
func (m *gatewayMetrics) callEnded(cell string, rep translate.CallReport) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(cell, methodLabel(rep.Method), rep.Outcome).Inc()
	m.rounds.WithLabelValues(cell).Observe(float64(rep.Rounds))
	m.overhead.WithLabelValues(cell).Observe(rep.Overhead.Seconds())
}

// unparked counts a parked call leaving the parked list.
func (m *gatewayMetrics) unparked(why string) {
	if m == nil {
		return
	}
	m.parkedEnded.WithLabelValues(why).Inc()
}

// LeftOut counts a server of a federated block left out of a merged
// answer to method.
func (m *gatewayMetrics) LeftOut(server, method string) {
	if m == nil {
		return
	}
	m.leftOut.WithLabelValues(server, method).Inc()
}

// Forwarded counts a request forwarded between gateway instances: direction
// is "sent" (this instance forwarded a retry or an answer to the instance
// owning the call) or "received" (another instance forwarded it here);
// outcome is "ok" or "error". It is the hook for instance-to-instance
// forwarding (caddy_mcp_gateway_instance_forwards_total).
func (m *gatewayMetrics) Forwarded(direction, outcome string) {
	if m == nil {
		return
	}
	m.forwards.WithLabelValues(direction, outcome).Inc()
}

// resumableEvent counts an event of a call parked holding no stream.
func (m *gatewayMetrics) resumableEvent(event string) {
	if m == nil {
		return
	}
	m.resumable.WithLabelValues(event).Inc()
}

// taskChanged counts a task created or ended.
func (m *gatewayMetrics) taskChanged(rep forward.TaskReport) {
	if m == nil {
		return
	}
	switch rep.Event {
	case "created":
		m.tasksMade.Inc()
	case "ended":
		m.tasksEnded.WithLabelValues(taskStatusLabel(rep.Status)).Inc()
	}
}

// taskStored counts an event of a task record.
func (m *gatewayMetrics) taskStored(event string) {
	if m == nil {
		return
	}
	m.taskStore.WithLabelValues(taskStoreEventLabel(event)).Inc()
}

// quirkRepaired counts one repair of a client's headers.
func (m *gatewayMetrics) quirkRepaired(repair string) {
	if m == nil {
		return
	}
	m.quirks.WithLabelValues(repair).Inc()
}

// healthCheck counts one active health check of upstream.
func (m *gatewayMetrics) healthCheck(upstream string, healthy bool) {
	if m == nil {
		return
	}
	result := "healthy"
	if !healthy {
		result = "unhealthy"
	}
	m.checks.WithLabelValues(upstream, result).Inc()
}

// bridgesSum returns a gauge function that adds count over the forward
// bridges of the loaded configurations.
func bridgesSum(count func(*forward.Bridge) int) func() float64 {
	return func() float64 {
		n := 0
		bridges.Range(func(_, v any) bool {
			n += count(v.(*bridgeState).bridge)
			return true
		})
		return float64(n)
	}
}

// waitingCount reads the reverse bridge's in-line requests waiting for an
// answer.
func waitingCount() float64 {
	n := 0
	reverses.Range(func(_, v any) bool {
		n += v.(*reverseState).rv.Waiting()
		return true
	})
	return float64(n)
}

// upstreamCollector reports, per upstream of the loaded configurations, its
// health and the forward bridge's sessions on it, read at scrape time.
type upstreamCollector struct{}

var (
	descUpstreamHealthy = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "upstream_healthy"),
		"Whether the upstream takes new work (1) or is marked down by a failed connection or health check (0).", []string{"upstream"}, nil)
	descSessions = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "upstream_sessions"),
		"Upstream legacy sessions the forward bridge holds open (leased or idle).", []string{"upstream"}, nil)
	descInits = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "upstream_session_initializations_total"),
		"Upstream legacy sessions the forward bridge has opened with initialize since the process started.", []string{"upstream"}, nil)
)

// Describe implements prometheus.Collector.
func (upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descUpstreamHealthy
	ch <- descSessions
	ch <- descInits
}

// Collect implements prometheus.Collector.
func (upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	stats := bridgeStats()
	upstreamStates.Range(func(_, v any) bool {
		s := v.(*upstreamState)
		if s.url == federatedUpstream {
			return true // a federated block's merged endpoint, in-process
		}
		healthy := 0.0
		if now.UnixNano() >= s.downUntil.Load() {
			healthy = 1
		}
		ch <- prometheus.MustNewConstMetric(descUpstreamHealthy, prometheus.GaugeValue, healthy, s.url)
		st := stats[s.url]
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(st.Open), s.url)
		ch <- prometheus.MustNewConstMetric(descInits, prometheus.CounterValue, float64(st.Initialized), s.url)
		return true
	})
}

// knownMethods are the MCP methods counted under their own name; any other
// method is "other", so that clients cannot grow the label set.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true, "subscriptions/listen": true,
	"tools/list": true, "tools/call": true, "prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true, "logging/setLevel": true,
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/roots/list_changed": true, "notifications/progress": true,
	// the Tasks extension's (the forward bridge answers them)
	"tasks/get": true, "tasks/update": true, "tasks/cancel": true,
	// not JSON-RPC methods: a client's answer to a server's request, and
	// the requests without a body
	"response": true, "GET": true, "DELETE": true,
}

// methodLabel bounds a JSON-RPC method for a metric label.
func methodLabel(method string) string {
	switch {
	case method == "":
		return "none"
	case knownMethods[method]:
		return method
	}
	return "other"
}

// taskStatuses are the statuses of a task, the values of the `status`
// label of the task series.
var taskStatuses = []string{"working", "input_required", "completed", "failed", "cancelled"}

// taskStatusLabel bounds a task status for a metric label.
func taskStatusLabel(status string) string {
	if slices.Contains(taskStatuses, status) {
		return status
	}
	return "other"
}

// taskStoreEvents are the events of task records, the values of the
// `event` label of task_store_events_total.
var taskStoreEvents = []string{forward.StoreFailed, forward.StoreTakenOver, forward.StoreLost}

// taskStoreEventLabel bounds a task record's event for a metric label.
func taskStoreEventLabel(event string) string {
	if slices.Contains(taskStoreEvents, event) {
		return event
	}
	return "other"
}

// taskCollector reports the tasks the forward bridge holds, by status,
// read at scrape time.
type taskCollector struct{}

var descTasks = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "tasks"),
	"Tasks the forward bridge holds (running, or finished and kept until their task_ttl), by status.", []string{"status"}, nil)

// Describe implements prometheus.Collector.
func (taskCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descTasks }

// Collect implements prometheus.Collector.
func (taskCollector) Collect(ch chan<- prometheus.Metric) {
	byStatus := map[string]int{}
	bridges.Range(func(_, v any) bool {
		for status, n := range v.(*bridgeState).bridge.Tasks() {
			byStatus[taskStatusLabel(status)] += n
		}
		return true
	})
	for _, status := range taskStatuses {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(byStatus[status]), status)
	}
}

// Interface guards
var (
	_ prometheus.Collector = upstreamCollector{}
	_ prometheus.Collector = taskCollector{}
)

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
