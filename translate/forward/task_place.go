package forward

import "sync"

// A task's place. A call that may become a task takes a place toward
// max_tasks and max_tasks_per_principal before it is sent (takeTaskPlace);
// the task it becomes holds that place while it runs, and gives it back the
// moment it is terminal — completed, failed or cancelled, by its client, its
// upstream, its ttl or the gateway stopping — since nothing runs for it any
// more. Its record stays readable (tasks/get) until the task's ttl, counting
// toward nothing: a principal that cancelled its tasks, or whose tasks
// completed, starts new ones at once, and finished tasks keep no one out.

// taskPlace is the place one task holds; free gives it back, once.
type taskPlace struct {
	b     *Bridge
	opts  *Options
	princ [16]byte
	once  sync.Once
}

// newTaskPlace is the place a task of princ made with o holds.
func (b *Bridge) newTaskPlace(o *Options, princ [16]byte) *taskPlace {
	return &taskPlace{b: b, opts: o, princ: princ}
}

// free gives the place back; later calls do nothing. A nil place is held
// by no one.
func (p *taskPlace) free() {
	if p == nil {
		return
	}
	p.once.Do(func() { p.b.releaseTaskPlace(p.opts, p.princ) })
}
