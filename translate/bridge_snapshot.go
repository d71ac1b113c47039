package translate

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
}

// ParkedCalls lists the parked calls, oldest parked first.
func (b *Bridge) ParkedCalls() []ParkedCall {
	now := time.Now()
	type parkedAt struct {
		ParkedCall
		at time.Time
	}
	b.mu.Lock()
	all := make([]parkedAt, 0, len(b.parked))
	for _, c := range b.parked {
		all = append(all, parkedAt{ParkedCall{
			Upstream: c.key.Upstream, Method: c.method, Name: c.name, Round: c.round,
			Waiting: len(c.pending), Started: c.started, Expires: c.expires,
			AgeMillis: now.Sub(c.started).Milliseconds(),
		}, c.expires.Add(-c.opts.ParkTTL)})
	}
	b.mu.Unlock()
	slices.SortFunc(all, func(x, y parkedAt) int { return x.at.Compare(y.at) })
	out := make([]ParkedCall, len(all))
	for i, p := range all {
		out[i] = p.ParkedCall
	}
	return out
}
