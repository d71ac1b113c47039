package forward

import (
	"slices"
	"time"
)

// ParkedCall describes one parked call for operators. It carries no
// principal, handle or payload.
type ParkedCall struct {
	Upstream  string    `json:"upstream"`
	Method    string    `json:"method"`
	Name      string    `json:"name,omitempty"` // tool or prompt name, or resource URI
	Round     uint32    `json:"round"`
	Waiting   int       `json:"waiting_inputs"` // input requests the client has to answer
	Started   time.Time `json:"started"`
	Expires   time.Time `json:"expires"`
	AgeMillis int64     `json:"age_ms"`
	// Holding is what this instance holds for the call: HoldingStream
	// (the upstream call's stream: the retry is served here, forwarded
	// here from another instance) or HoldingNothing (resume on: the
	// requestState carries what the retry needs, any instance sharing
	// state_key serves it; this one keeps the upstream session open, and
	// lists the call until the state is used here or expires).
	Holding string `json:"holding"`
	// Resumable is true when Holding is HoldingNothing.
	Resumable bool `json:"resumable"`
}

// What a parked call holds (ParkedCall.Holding).
const (
	HoldingStream  = "stream"
	HoldingNothing = "nothing"
)

// ParkedCalls lists the parked calls, those holding their stream and those
// holding nothing (resumable), oldest parked first.
func (b *Bridge) ParkedCalls() []ParkedCall {
	now := time.Now()
	type parkedAt struct {
		ParkedCall
		at time.Time
	}
	b.mu.Lock()
	all := make([]parkedAt, 0, len(b.parked)+len(b.places))
	for _, c := range b.parked {
		all = append(all, parkedAt{ParkedCall{
			Upstream: c.key.Upstream, Method: c.method, Name: c.name, Round: c.round,
			Waiting: len(c.pending), Started: c.started, Expires: c.expires,
			AgeMillis: now.Sub(c.started).Milliseconds(), Holding: HoldingStream,
		}, c.expires.Add(-c.opts.ParkTTL)})
	}
	for _, p := range b.places {
		all = append(all, parkedAt{ParkedCall{
			Upstream: p.key.Upstream, Method: p.method, Name: p.name, Round: p.round,
			Waiting: p.waiting, Started: p.started, Expires: p.expires,
			AgeMillis: now.Sub(p.started).Milliseconds(), Holding: HoldingNothing, Resumable: true,
		}, time.Unix(0, p.since)})
	}
	b.mu.Unlock()
	slices.SortFunc(all, func(x, y parkedAt) int { return x.at.Compare(y.at) })
	out := make([]ParkedCall, len(all))
	for i, p := range all {
		out[i] = p.ParkedCall
	}
	return out
}
