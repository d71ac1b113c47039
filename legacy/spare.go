package legacy

import "context"

// Spare connections. A call parked holding no stream lets go of its
// upstream call stream while the upstream is still writing it, so the
// connection cannot carry another request and is closed; an instance that
// parks call after call (its retries resumed elsewhere) would dial for
// every call's POST. Where ConnOptions.Spares allows, each such connection
// is replaced at once by one dialed in the background, so the next request
// finds a connection ready. The dial costs the same CPU, off the request's
// path; a spare the upstream closes while idle is skipped like any idle
// connection (reusable), and a failed dial is forgotten (the next request
// dials, and reports, itself).

// spare dials, in the background, a replacement for pc, which was just
// closed mid-answer, unless the upstream's idle and dialing connections
// already make Spares.
func (c *ConnClient) spare(pc *conn) {
	if c.opts.Spares == 0 {
		return
	}
	c.mu.Lock()
	if len(c.idle[pc.key])+c.dialing[pc.key] >= c.opts.Spares {
		c.mu.Unlock()
		return
	}
	c.dialing[pc.key]++
	gen := c.gen
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout)
		nc, err := c.dial(ctx, pc.key, pc.scheme, pc.addr, pc.host)
		cancel()
		c.mu.Lock()
		if c.dialing[pc.key]--; c.dialing[pc.key] == 0 {
			delete(c.dialing, pc.key)
		}
		current := c.gen == gen
		c.mu.Unlock()
		switch {
		case err != nil:
		case current:
			c.put(nc)
		default:
			nc.nc.Close() // CloseIdleConnections ran meanwhile
		}
	}()
}
