"""Linux facts, read or decoded: /proc readers (procfs, procfs_fds), sock_diag (sockdiag) and
syscall number tables (syscall_table). Pure readers with an injectable procfs root; nothing here
classifies. May import: tracer.events."""
