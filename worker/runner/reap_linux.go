package runner

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// becomeSubreaper makes the runner inherit its program's orphaned
// descendants, so it can reap them and tell when the program's group is
// empty: orphans left to an init that does not reap (as in many containers)
// would linger as zombies and keep the group alive.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
