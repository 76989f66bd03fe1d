//! The "Data scale" section of the report (S6): the seed, bytes per unit,
//! what one operation writes, the plan check and the sweeper under load.

use std::fmt::Write as _;

use crate::{plans, scale::Report, servers::Kind};

fn mb(bytes: f64) -> String {
    format!("{:.1}", bytes / 1024.0 / 1024.0)
}

pub fn data_scale(s: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Data scale (S6)\n\n\
         Seeded {} connections ({} users × 5 providers, each with its client's grant), {} audit rows, {} live tickets and {} web sessions \
         ({} × the full scale) with server-side SQL (`bench/sql/seed.sql`) in **{:.1} s** \
         (inserts, then VACUUM and ANALYZE; the CHECKPOINT after it took {:.1} s more).\n",
        s.scale.users * 5,
        s.scale.users,
        s.scale.audit,
        s.scale.tickets,
        s.scale.sessions,
        s.fraction,
        s.seed_s,
        s.checkpoint_s
    );
    out.push_str(
        "| unit | table | rows | bytes per row (heap + TOAST + indexes) | of which indexes | table total MB |\n\
         |---|---|--:|--:|--:|--:|\n",
    );
    for w in &s.weights {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {:.0} | {:.0} | {} |",
            w.unit,
            w.table,
            w.rows,
            w.per_row(),
            w.indexes as f64 / w.rows.max(1) as f64,
            mb(w.total as f64)
        );
    }
    out.push_str(
        "\nWhat one operation writes, one client, on the seeded database (WAL: `pg_current_wal_lsn()` \
         before and after, the whole server's; \"idle\" is what the server wrote in a window of the \
         same length right after, i.e. the part that may be someone else's):\n\n\
         | operation | operations | WAL bytes per operation | idle WAL per operation's time | rows written per operation |\n\
         |---|--:|--:|--:|--:|\n",
    );
    for p in &s.per_op {
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.0} | {} |",
            p.op,
            p.n,
            p.wal,
            p.idle_wal,
            p.rows.map_or("–".to_owned(), |r| format!("{r:.1}"))
        );
    }
    let _ = writeln!(
        out,
        "\nPlan check: {} statements of the request paths, the sweeper and foreign key lookups EXPLAINed on the seeded \
         database (custom plans with representative parameters, and again with `enable_seqscan` off); \
         {} failing.\n",
        s.checked.statements,
        s.checked.failures()
    );
    out.push_str(&plans::describe(&s.checked));
    out.push_str(&overflow_line(s));
    let _ = writeln!(
        out,
        "\nSweeper under load: {} expired tickets and {} audit rows past retention added in {:.1} s; S3 at {} \
         concurrent: p99 {:.2} ms quiet ({} runs), {:.2} ms while the sweeper ran ({} runs); the sweeper {}.{}\n",
        s.scale.backlog,
        s.scale.old_audit,
        s.sweep.backlog_s,
        s.sweep.level,
        crate::scale::p99(&s.sweep.quiet),
        s.sweep.quiet.len(),
        crate::scale::p99(&s.sweep.during),
        s.sweep.during.len(),
        s.sweep.outcome,
        if s.sweep.seq_scans.is_empty() {
            String::new()
        } else {
            let scans: Vec<String> = s
                .sweep
                .seq_scans
                .iter()
                .map(|(t, n)| format!("`{t}` {n}×"))
                .collect();
            format!(
                " Sequential scans while it ran (all backends of the database): {}.",
                scans.join(", ")
            )
        }
    );
    out
}

/// How often each side's per-thread connections were all taken, so that a
/// statement went to the shared pool (and paid its check on return): a
/// seeded side whose statements take longer has more of them in flight.
fn overflow_line(s: &Report) -> String {
    if s.overflow.is_empty() {
        return String::new();
    }
    let cells: Vec<String> = s
        .overflow
        .iter()
        .map(|((scenario, level, side), per_request)| {
            format!(
                "{} at {} {} {:.2}",
                scenario.id(),
                level,
                if *side == Kind::Seeded {
                    "seeded"
                } else {
                    "empty"
                },
                crate::lookup::median(per_request)
            )
        })
        .collect();
    format!(
        "\nStatements the shared pool served because every per-thread connection was taken, per request \
         (from each server's `/metrics`, median of the rounds; each such statement costs a round trip more): {}.\n",
        cells.join(", ")
    )
}
