package translate

import "time"

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

// ParkedCalls lists the parked calls, oldest first.
func (b *Bridge) ParkedCalls() []ParkedCall {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ParkedCall, 0, b.order.Len())
	for e := b.order.Front(); e != nil; e = e.Next() {
		c := e.Value.(*call)
		out = append(out, ParkedCall{
			Upstream: c.key.Upstream, Method: c.method, Name: c.name, Round: c.round,
			Waiting: len(c.pending), Started: c.started, Expires: c.expires,
			AgeMillis: now.Sub(c.started).Milliseconds(),
		})
	}
	return out
}
