package translate

import "time"

// Observer learns what the bridges do, for metrics and logs. Its methods are
// called synchronously, sometimes with the bridge's timers running, and must
// return quickly. A nil Observer observes nothing.
type Observer interface {
	// CallEnded reports a bridged call that ended, once per call: a call
	// of the forward bridge spans every round of its client's retries, a
	// call of the reverse bridge is one request of a legacy client.
	CallEnded(CallReport)
	// Unparked reports a parked call of the forward bridge leaving the
	// parked list, and why: ParkAnswered, ParkExpired, ParkCancelled or
	// ParkFailed; or a call that wanted to park refused (ParkRefused).
	Unparked(why string)
}

// Outcomes of a bridged call (CallReport.Outcome) and of one client request
// (Served.Outcome).
const (
	OutcomeComplete      = "complete"       // the upstream's result reached the client
	OutcomeError         = "error"          // a JSON-RPC error, or the upstream failed
	OutcomeInputRequired = "input_required" // the request ended with input_required (forward bridge)
	OutcomeCancelled     = "cancelled"      // the client left or cancelled, or the gateway stopped
	OutcomeExpired       = "expired"        // parked (or waiting for in-line answers) past its time
	OutcomeRefused       = "refused"        // wanted to park, or would have, and max_parked or max_parked_per_principal had no room
)

// Why a parked call left the parked list (Observer.Unparked).
const (
	ParkAnswered  = "answered"  // the client's retry took it
	ParkExpired   = "expired"   // park_ttl passed
	ParkRefused   = "refused"   // never parked: max_parked or max_parked_per_principal had no room
	ParkCancelled = "cancelled" // the gateway stopped
	ParkFailed    = "failed"    // the upstream call failed (or overflowed) while parked
)

// CallReport describes a bridged call that ended. It carries no principal,
// id, params or state.
type CallReport struct {
	// Bridge is "forward" (modern client, legacy upstream) or "reverse"
	// (legacy client, modern upstream).
	Bridge   string
	Upstream string
	Method   string
	// Name is the tool or prompt name, or the resource URI.
	Name string
	// Rounds counts the input rounds the call went through.
	Rounds int
	// Outcome is one of the Outcome* constants; OutcomeInputRequired only
	// for a forward-bridged call a legacy server ended with "URL
	// elicitation required" (-32042): the client's retry is a new call.
	Outcome string
	// Reason says, in words, why a call that did not complete ended.
	Reason string
	// Duration runs from the call's first request to its end.
	Duration time.Duration
	// Overhead is the time the gateway spent translating the call's
	// messages (sealing and opening state, building input requests,
	// reshaping results), not waiting for either side.
	Overhead time.Duration
}

// Served describes how the bridges answered one client request.
type Served struct {
	// Round is the input round the request belongs to: for the forward
	// bridge the round of the requestState it carried (0 for a first
	// request), for the reverse bridge the in-line rounds it went through.
	Round int
	// Outcome is one of the Outcome* constants ("" for a notification,
	// a local answer or a subscription stream).
	Outcome string
	// Cause is the upstream failure behind an error answer, for the logs
	// only: it may name the upstream's address, which the client's
	// message does not. Nil when no upstream failed.
	Cause error
	// Refused, when a retry's requestState was refused, says why
	// (another principal's, expired, already used, ...), for the debug
	// log only: the client's refusal is the same whatever the reason.
	Refused string
}

// Stopwatch adds the time since its start to *into when stopped:
// `defer translate.StartWatch(&c.overhead).Stop()`.
type Stopwatch struct {
	into  *time.Duration
	start time.Time
}

// StartWatch starts a Stopwatch that adds to *into when stopped.
func StartWatch(into *time.Duration) Stopwatch { return Stopwatch{into, time.Now()} }

// Stop adds the time since the Stopwatch started to its total.
func (s Stopwatch) Stop() { *s.into += time.Since(s.start) }
