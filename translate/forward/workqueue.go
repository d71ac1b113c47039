package forward

import "sync"

// workQueue runs jobs in the background in at most workers goroutines, from
// a queue of at most limit jobs: the bridge's probes of expired resumable
// states (abandon.go) and checks of the places calls hold
// (places.go), which may come by the thousand at once (every call
// parked in one busy second expires in the same second) and must neither
// start a goroutine each nor wait for each other's callers. Safe for
// concurrent use.
type workQueue struct {
	workers, limit int

	mu      sync.Mutex
	queue   []func()
	running int
	closed  bool
}

// add queues job, starting a worker if fewer than workers run; it reports
// false, and drops job, when the queue is full or closed.
func (q *workQueue) add(job func()) bool {
	q.mu.Lock()
	if q.closed || len(q.queue) >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.queue = append(q.queue, job)
	start := q.running < q.workers
	if start {
		q.running++
	}
	q.mu.Unlock()
	if start {
		go q.work()
	}
	return true
}

// work runs queued jobs until none is left, or the queue closes.
func (q *workQueue) work() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 || q.closed {
			q.queue = nil
			q.running--
			q.mu.Unlock()
			return
		}
		job := q.queue[0]
		q.queue[0] = nil
		q.queue = q.queue[1:]
		q.mu.Unlock()
		job()
	}
}

// close drops the queued jobs and refuses new ones; running jobs finish.
func (q *workQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.queue = nil
	q.mu.Unlock()
}
