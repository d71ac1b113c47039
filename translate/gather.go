package translate

import (
	"hash/maphash"
	"runtime"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// The forward bridge's gather policy decides how long a round waits, after
// a legacy upstream's in-line question, for sibling questions before the
// client gets input_required.
//
// A round always takes the questions that are already there: what the
// call's reader has delivered, after yielding a few times so that a sibling
// written back to back and being parsed right now is caught. No timer: a
// server that asks one question at a time (most) pays nothing. Only targets
// (upstream, method, tool or prompt name or resource URI) known to ask
// several questions at once also wait GatherWindow: those that gathered two
// or more in a round, or whose question arrived while the call was parked
// (a sibling that missed its round, asked in the next one). Upstreams
// listed in GatherAlways wait the window on every round, first call
// included.

// maxGatherTargets bounds the targets the bridge remembers as asking
// several questions at once; the least recently used is forgotten (it
// then pays one split round to be learned again).
const maxGatherTargets = 4096

// gatherYields is how often a round yields to the call's reader before it
// takes what has arrived.
const gatherYields = 3

// maxCollected bounds the messages a round without a window takes before
// it parks, so that an upstream streaming notifications cannot hold it.
const maxCollected = 64

// gatherPolicy remembers the targets that ask several questions at once.
// Safe for concurrent use.
type gatherPolicy struct {
	seed    maphash.Seed
	learned *lru.Cache[uint64, struct{}] // target hashes
	always  atomic.Pointer[map[string]bool]
}

func newGatherPolicy() *gatherPolicy {
	learned, err := lru.New[uint64, struct{}](maxGatherTargets)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &gatherPolicy{seed: maphash.MakeSeed(), learned: learned}
}

// target identifies what c called. A hash: names and URIs can be long, and
// a collision only makes a round wait the window.
func (g *gatherPolicy) target(c *call) uint64 {
	var h maphash.Hash
	h.SetSeed(g.seed)
	h.WriteString(c.key.Upstream)
	h.WriteByte(0)
	h.WriteString(c.method)
	h.WriteByte(0)
	h.WriteString(c.name)
	return h.Sum64()
}

// waits reports whether c's rounds wait the gather window.
func (g *gatherPolicy) waits(c *call) bool {
	if m := g.always.Load(); m != nil && (*m)[c.key.Upstream] {
		return true
	}
	_, ok := g.learned.Get(g.target(c))
	return ok
}

// learn remembers that c's target asks several questions at once.
func (g *gatherPolicy) learn(c *call) { g.learned.Add(g.target(c), struct{}{}) }

// setAlways replaces the upstreams whose every round waits the window.
func (g *gatherPolicy) setAlways(upstreams []string) {
	m := make(map[string]bool, len(upstreams))
	for _, u := range upstreams {
		m[u] = true
	}
	g.always.Store(&m)
}

// yieldToReaders lets the goroutines that read the upstream run before a
// round takes what has arrived.
func yieldToReaders() {
	for range gatherYields {
		runtime.Gosched()
	}
}
