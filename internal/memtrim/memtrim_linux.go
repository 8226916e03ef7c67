package memtrim

import "golang.org/x/sys/unix"

func dontNeed(addr, length uint64) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(addr), uintptr(length), unix.MADV_DONTNEED); e != 0 {
		return e
	}
	return nil
}
