// Package catchuprss measures the memory of a real `walctl catchup run`
// process against its budgets (issue 18): a backlog is built with
// pubbench.MakeBacklog, the master's admission reserves the table, the
// executor runs as a process, and its peak resident set (the kernel's
// maxrss, VmHWM at exit) must stay within catchup.merge_buffer_bytes +
// catchup.cache_bytes + 64 MiB. The test suite runs 256 MiB with tight
// budgets; `make catchup-rss` runs 2 GiB with the defaults (1 GiB, 128 MiB).
package catchuprss
