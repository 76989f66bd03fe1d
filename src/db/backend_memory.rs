//! One statement every new Postgres connection runs before any other, so
//! that its backend stops handing memory back to the kernel after every
//! statement and faulting it in again for the next.
//!
//! A backend frees a statement's memory when the statement ends. Under
//! glibc's `malloc` (Debian's and Ubuntu's Postgres packages, the
//! `postgres` Docker images but the Alpine ones, most managed services),
//! whenever more than the trim threshold (128 KiB at first) is free at the
//! top of the heap, `free` gives it back with `brk`; the next statement
//! takes it again, one page fault and one zeroed page at a time. A
//! statement that reads a table by index allocates more than that (a B-tree
//! scan's state alone is tens of kilobytes), so on a deployment's tables,
//! large enough to be read by index, every statement paid dozens of page
//! faults and two `brk` calls. In the data-scale benchmark (S6) that was
//! 40 % of Postgres's CPU per call: the gap between a seeded and an empty
//! database, which reads its few rows without an index (`bench/NOTES.md`).
//!
//! glibc adapts by itself: the first time a block above its `mmap`
//! threshold is freed, it raises that threshold to the block's size and the
//! trim threshold to twice it, for the life of the process. One statement
//! that allocates and frees 1 MiB does that at once, so the backend keeps
//! up to 2 MiB of freed memory for reuse instead of returning it every
//! time. Postgres has no setting for it (one was proposed in 2023 and not
//! adopted); an operator who controls Postgres's environment can get the
//! same with `GLIBC_TUNABLES=glibc.malloc.trim_threshold=…`. Under another
//! allocator (musl, in the Alpine images) the statement is one allocation
//! of 1 MiB per connection and changes nothing.

use sqlx::PgConnection;

/// Allocates and frees 1 MiB in the connection's backend (see the module).
pub async fn keep_freed_memory(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    // `repeat` builds its whole result in one allocation, beyond glibc's
    // initial 128 KiB mmap threshold, freed when the statement ends.
    sqlx::query_scalar!(r#"SELECT length(repeat('x', 1048576)) AS "length!""#)
        .fetch_one(conn)
        .await?;
    Ok(())
}
