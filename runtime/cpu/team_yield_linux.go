package cpu

import "syscall"

// osYield gives the thread's core to another runnable thread, if the OS
// has one: on a loaded machine, the worker this one waits for may be
// runnable but without a core.
func osYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
