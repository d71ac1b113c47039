package forward

import (
	"hash/maphash"
	"runtime"

	lru "github.com/hashicorp/golang-lru/v2"
)

// The forward bridge's gather policy decides how long a round waits, after
// a legacy upstream's in-line question, for sibling questions before the
// client gets input_required.
//
// A round always takes the questions that are already there: what the
// call's reader has delivered, after yielding a few times so that a sibling
// written back to back and being parsed right now is caught. Whether it
// also waits GatherWindow for more depends on what the bridge has learned
// of the target (upstream, method, tool or prompt name or resource URI):
//
//   - a target not seen yet waits the window on its first round, which
//     teaches the bridge whether it asks one question or several at once;
//   - a target that asked one question per round parks at once, without a
//     timer: a server that asks one question at a time (most) pays the
//     window once, not on every round;
//   - a target that asked several at once — a round that gathered two or
//     more, or a question that arrived while its call was parked (a sibling
//     that missed its round, asked in the next one) — waits the window on
//     every round from then on.
//
// The calls of a Request with GatherAlways wait the window on every round.

// maxGatherTargets bounds the targets the bridge remembers; the least
// recently used is forgotten (its next round waits the window again).
const maxGatherTargets = 4096

// gatherYields is how often a round yields to the call's reader before it
// takes what has arrived.
const gatherYields = 3

// maxCollected bounds the messages a round without a window takes before
// it parks, so that an upstream streaming notifications cannot hold it.
const maxCollected = 64

// gatherPolicy remembers, per target, whether it asks several questions at
// once. Safe for concurrent use.
type gatherPolicy struct {
	seed    maphash.Seed
	learned *lru.Cache[uint64, bool] // target hash → asks several at once
}

func newGatherPolicy() *gatherPolicy {
	learned, err := lru.New[uint64, bool](maxGatherTargets)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &gatherPolicy{seed: maphash.MakeSeed(), learned: learned}
}

// target identifies what c called. A hash: names and URIs can be long, and
// a collision (64 bits, seeded per process) would only give one target the
// other's verdict.
func (g *gatherPolicy) target(c *call) uint64 {
	return g.targetOf(c.key.Upstream, c.method, c.name)
}

func (g *gatherPolicy) targetOf(upstream, method, name string) uint64 {
	var h maphash.Hash
	h.SetSeed(g.seed)
	h.WriteString(upstream)
	h.WriteByte(0)
	h.WriteString(method)
	h.WriteByte(0)
	h.WriteString(name)
	return h.Sum64()
}

// asked reports whether the target (upstream, method, name) is known to
// have asked for input: one of its calls reached a round. The bridge
// refuses such a call before sending it when the parked table has no room
// for it (see admit.go); a target forgotten by the LRU is simply not
// known.
func (g *gatherPolicy) asked(upstream, method, name string) bool {
	return g.learned.Contains(g.targetOf(upstream, method, name))
}

// waits reports whether c's rounds wait the gather window: c always
// gathers, or its target asks several questions at once, or is not known
// yet.
func (g *gatherPolicy) waits(c *call) bool {
	if c.always {
		return true
	}
	several, known := g.learned.Get(g.target(c))
	return several || !known
}

// learn records what a round of c's target showed: several questions at
// once (for good), or one (unless it asked several before).
func (g *gatherPolicy) learn(c *call, several bool) {
	if several {
		g.learned.Add(g.target(c), true)
		return
	}
	g.learned.ContainsOrAdd(g.target(c), false)
}

// yieldToReaders lets the goroutines that read the upstream run before a
// round takes what has arrived.
func yieldToReaders() {
	for range gatherYields {
		runtime.Gosched()
	}
}
