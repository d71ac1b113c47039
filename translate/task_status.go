package translate

// The statuses of a task: the same five in the 2025 experimental tasks
// (2025-11-25) and in the Tasks extension (2026-07-28), so both bridges
// read and write them as they are. A task starts working, may go to
// input_required and back, and ends in one of the three terminal
// statuses, which never change.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// TaskTerminal reports whether status is a terminal one: completed,
// failed or cancelled.
func TaskTerminal(status string) bool {
	return status == TaskCompleted || status == TaskFailed || status == TaskCancelled
}

// KnownTaskStatus reports whether s is one of the five task statuses.
func KnownTaskStatus(s string) bool {
	switch s {
	case TaskWorking, TaskInputRequired, TaskCompleted, TaskFailed, TaskCancelled:
		return true
	}
	return false
}
