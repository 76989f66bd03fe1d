//! The targets, checked against this run: mcp-connect against its
//! floor — bare rmcp for S1, bare rmcp + exactly its SQL for S2 and S3 —
//! rather than against the Python SDK, which stays in the table as what a
//! user would write instead.

use std::{collections::BTreeMap, fmt::Write as _};

use crate::{
    dbref::Reference,
    lookup::{Lookup, median},
    report::{Key, Summary},
    scale,
    scenarios::Scenario,
    servers::Kind,
};

fn mark(ok: bool) -> &'static str {
    if ok { "✅" } else { "❌" }
}

/// The full run's own target: done within a quarter hour after the build
/// (`wall`: from the first server's start to the report).
pub fn quarter_hour(wall: std::time::Duration) -> String {
    let s = wall.as_secs_f64();
    format!(
        "- {} The full run within 15 minutes after the build: {s:.0} s\n",
        mark(s < 15.0 * 60.0)
    )
}

fn cpu(s: &Summary) -> f64 {
    s.cpu_per_k + s.db_cpu_per_k.unwrap_or(0.0)
}

pub fn targets(
    results: &BTreeMap<Key, Summary>,
    levels: &[usize],
    db: &Reference,
    work: &BTreeMap<Scenario, (f64, f64)>,
    scaled: Option<&scale::Report>,
) -> String {
    let get = |sc, l, k| results.get(&(sc, l, k));
    let mut out = String::new();
    for scenario in [Scenario::Discover, Scenario::Ask, Scenario::RetryComplete] {
        let floor = scenario.floor();
        let rows: Vec<(usize, f64, f64)> = levels
            .iter()
            .filter_map(|&l| {
                let (o, f) = (get(scenario, l, Kind::Ours)?, get(scenario, l, floor)?);
                Some((l, o.rate / f.rate, cpu(o) / cpu(f) - 1.0))
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let ok = rows.iter().all(|&(_, r, c)| r >= 0.95 && c <= 0.10);
        let detail: Vec<String> = rows
            .iter()
            .map(|(l, r, c)| format!("{r:.2}× at {l} ({:+.0}% CPU per request)", c * 100.0))
            .collect();
        let _ = writeln!(
            out,
            "- {} {} ≥ 0.95× {}'s throughput and server + DB CPU per request within 10 % of it: {}",
            mark(ok),
            scenario.id(),
            floor.label(),
            detail.join(", ")
        );
    }
    if let (Some(o), Some(f)) = (
        get(Scenario::RetryComplete, 64, Kind::Ours),
        get(Scenario::RetryComplete, 64, Kind::BareSql),
    ) {
        let _ = writeln!(
            out,
            "- {} S3 p99 at 64 concurrent within 1.2× of bare rmcp + SQL's: {:.2} ms vs {:.2} ms ({:.2}×)",
            mark(o.p99 <= 1.2 * f.p99),
            o.p99,
            f.p99,
            o.p99 / f.p99
        );
    }
    if let Some(s) = scaled {
        let rows: Vec<(Scenario, usize, f64)> = scale::SEEDED
            .iter()
            .flat_map(|&sc| levels.iter().map(move |&l| (sc, l)))
            .filter_map(|(sc, l)| {
                let (seeded, empty) = (get(sc, l, Kind::Seeded)?, get(sc, l, Kind::Empty)?);
                Some((sc, l, seeded.rate / empty.rate))
            })
            .collect();
        let ok = !rows.is_empty() && rows.iter().all(|r| r.2 >= 0.90);
        let detail: Vec<String> = rows
            .iter()
            .map(|(sc, l, r)| format!("{} {r:.2}× at {l}", sc.id()))
            .collect();
        let _ = writeln!(
            out,
            "- {} S6: S2, S3, S4 on the seeded database within 10 % of an empty one, measured in turn (seeded ÷ empty req/s): {}",
            mark(ok),
            detail.join(", ")
        );
        let _ = writeln!(out, "- S6's floor: {}", lookup_line(&s.lookup));
        out.push_str(&floor_in_s6(results, levels));
        let failing = s.checked.failures();
        let _ = writeln!(
            out,
            "- {} S6: no sequential scan of a table of the service on a request path or in the sweeper ({} statements and foreign key lookups EXPLAINed): {}",
            mark(failing == 0),
            s.checked.statements,
            if failing == 0 {
                "none".to_owned()
            } else {
                format!("{failing} found, see Data scale")
            }
        );
        let (quiet, during) = (scale::p99(&s.sweep.quiet), scale::p99(&s.sweep.during));
        let _ = writeln!(
            out,
            "- {} S6: S3 p99 at {} while the sweeper deletes {} expired tickets and {} audit rows past retention ≤ 1.5× quiet: {:.2} ms vs {:.2} ms ({:.2}×; the sweeper {})",
            mark(during <= 1.5 * quiet),
            s.sweep.level,
            s.scale.backlog,
            s.scale.old_audit,
            during,
            quiet,
            during / quiet,
            s.sweep.outcome
        );
        let _ = writeln!(
            out,
            "- {} S6: seeded with server-side SQL in under five minutes: {:.0} s{}",
            mark(s.seed_s < 300.0),
            s.seed_s,
            if s.fraction == 1.0 {
                String::new()
            } else {
                format!(" (at {} × the full scale)", s.fraction)
            }
        );
    }
    let s4: Vec<(usize, f64)> = levels
        .iter()
        .filter_map(|&l| {
            let (o, f) = (
                get(Scenario::CallAsUser, l, Kind::Ours)?,
                get(Scenario::CallAsUser, l, Kind::BareSql)?,
            );
            Some((l, o.rate / f.rate))
        })
        .collect();
    if !s4.is_empty() {
        let detail: Vec<String> = s4.iter().map(|(l, r)| format!("{r:.2}× at {l}")).collect();
        let _ = writeln!(
            out,
            "- {} S4 ≥ 0.9× its floor (bare rmcp + SQL + the same upstream call with the stored token, no unsealing): {}",
            mark(s4.iter().all(|x| x.1 >= 0.9)),
            detail.join(", ")
        );
    }
    out.push_str(&required_work(results, levels));
    out.push_str(&pooled(results));
    let rss: Vec<f64> = [Kind::Ours, Kind::Seeded, Kind::Empty]
        .into_iter()
        .flat_map(|k| {
            Scenario::ALL
                .iter()
                .filter_map(move |&sc| get(sc, 64, k)?.rss_mb)
        })
        .collect();
    if !rss.is_empty() {
        let worst = rss.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "- {} mcp-connect peak RSS < 60 MB in every 64-concurrent run (S6 included): {worst:.1} MB at most",
            mark(worst < 60.0)
        );
    }
    out.push_str(&noise(results));
    for scenario in [Scenario::Ask, Scenario::RetryComplete] {
        let r: Vec<String> = levels
            .iter()
            .filter_map(|&l| {
                let (o, p) = (
                    get(scenario, l, Kind::Ours)?,
                    get(scenario, l, Kind::Python)?,
                );
                Some(format!("{:.1}× at {l}", o.rate / p.rate))
            })
            .collect();
        if !r.is_empty() {
            let _ = writeln!(
                out,
                "- For a user's choice: {} mcp-connect ÷ the Python SDK (what a user would write instead): {}",
                scenario.id(),
                r.join(", ")
            );
        }
    }
    if let (Some(o), Some(b)) = (
        get(Scenario::RetryComplete, 1, Kind::Ours),
        get(Scenario::RetryComplete, 1, Kind::BareSql),
    ) {
        let _ = writeln!(
            out,
            "- S3 gap to bare rmcp + SQL at concurrency 1: {:.3} ms per request at p50{}{}",
            o.p50 - b.p50,
            work.get(&Scenario::RetryComplete)
                .map_or(String::new(), |(statements, _)| format!(
                    "; mcp-connect runs {statements:.1} SQL statements per request"
                )),
            db.select_ms.map_or(String::new(), |rt| format!(
                "; Postgres alone answers a `SELECT 1` round trip in {rt:.3} ms"
            ))
        );
    }
    out
}

/// How far apart the rounds of one server in one cell lie in this run: the
/// yardstick for a ratio near a bar. Two servers' medians are each that
/// uncertain, so a ratio closer to 0.95 than the typical spread says
/// nothing about which side of the bar the code is on.
fn noise(results: &BTreeMap<Key, Summary>) -> String {
    let mut spreads: Vec<(f64, &Key)> = results
        .iter()
        .filter_map(|(key, s)| Some((s.spread?, key)))
        .collect();
    if spreads.is_empty() {
        return String::new();
    }
    spreads.sort_by(|a, b| a.0.total_cmp(&b.0));
    let typical = median(&spreads.iter().map(|(s, _)| *s).collect::<Vec<_>>());
    let (worst, &(scenario, level, kind)) = spreads[spreads.len() - 1];
    let mut line = format!(
        "- Noise in this run: the rounds of one server in one cell differ in req/s by {:.0} % (median over {} cells; fastest ÷ slowest round − 1), by up to {:.0} % ({} at {level}, {})",
        typical * 100.0,
        spreads.len(),
        worst * 100.0,
        scenario.id(),
        kind.label(),
    );
    let errors = ratio_errors(results);
    if errors.is_empty() {
        line.push_str("; a ratio nearer a bar than that is no measured difference from it\n");
    } else {
        let _ = writeln!(
            line,
            "; a ratio of two servers in one cell is known to ±{:.0} % (one standard error of the median of the rounds' own ratios, each round's against the same round's; median over {} pairs of S1–S4): a ratio within that of its bar is no measured difference from it",
            median(&errors) * 100.0,
            errors.len(),
        );
    }
    line
}

/// The standard error of each ratio the targets read in S1–S4 (mcp-connect
/// against its floor and against the floor + required work, and the latter
/// against the floor), from the rounds the two servers ran in turn.
fn ratio_errors(results: &BTreeMap<Key, Summary>) -> Vec<f64> {
    let mut errors = Vec::new();
    for (&(scenario, level, kind), ours) in results {
        if kind != Kind::Ours || scenario == Scenario::ConnectFlow {
            continue;
        }
        let floor = results.get(&(scenario, level, scenario.floor()));
        let required = results.get(&(scenario, level, Kind::Required));
        for (a, b) in [
            (Some(ours), floor),
            (Some(ours), required),
            (required, floor),
        ] {
            if let (Some(a), Some(b)) = (a, b)
                && let Some(error) = crate::report::ratio_error(&a.rates, &b.rates)
            {
                errors.push(error);
            }
        }
    }
    errors
}

/// Where the floors cannot be reached: for each scenario, at each level with
/// a run of the floor plus the work mcp-connect may not leave out, what that
/// work alone costs the floor, and what the rest of mcp-connect costs beyond
/// it. Where the work alone leaves the floor under its bar (0.95×, S4 0.9×), no server
/// that does it can meet the target there: the line says so.
fn required_work(results: &BTreeMap<Key, Summary>, levels: &[usize]) -> String {
    let get = |sc, l, k| results.get(&(sc, l, k));
    let mut out = String::new();
    for scenario in [
        Scenario::Discover,
        Scenario::Ask,
        Scenario::RetryComplete,
        Scenario::CallAsUser,
    ] {
        let floor = scenario.floor();
        let cells: Vec<RequiredCell> = levels
            .iter()
            .filter_map(|&level| {
                let (ours, floor_run, required) = (
                    get(scenario, level, Kind::Ours)?,
                    get(scenario, level, floor)?,
                    get(scenario, level, Kind::Required)?,
                );
                Some(RequiredCell {
                    level,
                    work: required.rate / floor_run.rate,
                    work_cpu: cpu(required) / cpu(floor_run) - 1.0,
                    rest: ours.rate / required.rate,
                    rest_cpu: cpu(ours) / cpu(required) - 1.0,
                })
            })
            .collect();
        if cells.is_empty() {
            continue;
        }
        let list = |f: &dyn Fn(&RequiredCell) -> String| {
            cells.iter().map(f).collect::<Vec<_>>().join(", ")
        };
        let _ = write!(
            out,
            "- What {}'s floor leaves out: the required work alone takes {} to {} of its throughput ({} CPU per request); \
             mcp-connect is at {} of the floor + required work ({} CPU per request)",
            scenario.id(),
            floor.label(),
            list(&|c| format!("{:.2}× at {}", c.work, c.level)),
            list(&|c| format!("{:+.0}%", c.work_cpu * 100.0)),
            list(&|c| format!("{:.2}× at {}", c.rest, c.level)),
            list(&|c| format!("{:+.0}%", c.rest_cpu * 100.0)),
        );
        let bar = throughput_bar(scenario);
        // Judged as printed (two decimals): a cell shown at the bar is not
        // called out of reach.
        let out_of_reach: Vec<String> = cells
            .iter()
            .filter(|c| (c.work * 100.0).round() < bar * 100.0)
            .map(|c| c.level.to_string())
            .collect();
        if out_of_reach.is_empty() {
            let _ = writeln!(
                out,
                ": the work leaves the {bar:.2}× bar within reach at every level"
            );
        } else {
            let _ = writeln!(
                out,
                ": under the {bar:.2}× bar at {} — there the target is out of reach for any server that does this work",
                out_of_reach.join(", ")
            );
        }
    }
    out
}

/// The two ratios of [`required_work`] over every cell of S1–S4 at once:
/// one cell's ratio is known to a few percent only on a shared machine,
/// the geometric mean of a dozen to a third of that. "The rest of
/// mcp-connect" is what the code beyond the required work costs in
/// throughput, with the uncertainty its rounds leave.
fn pooled(results: &BTreeMap<Key, Summary>) -> String {
    let pool = |upper: Kind, lower: &dyn Fn(Scenario) -> Kind| {
        let cells: Vec<(f64, f64)> = results
            .iter()
            .filter(|((scenario, _, kind), _)| *kind == upper && *scenario != Scenario::ConnectFlow)
            .filter_map(|(&(scenario, level, _), a)| {
                let b = results.get(&(scenario, level, lower(scenario)))?;
                let error = crate::report::ratio_error(&a.rates, &b.rates)?;
                Some(((a.rate / b.rate).ln(), error))
            })
            .collect();
        geometric_mean(&cells).map(|(ratio, error)| (ratio, error, cells.len()))
    };
    let mut out = String::new();
    if let (Some((rest, rest_error, n)), Some((work, work_error, m))) = (
        pool(Kind::Ours, &|_| Kind::Required),
        pool(Kind::Required, &Scenario::floor),
    ) {
        let _ = writeln!(
            out,
            "- Over every cell of S1–S4 at once (geometric means of the cells' ratios, ± one standard error from the rounds' own ratios): the required work takes the floors to {work:.2}× of their throughput (±{:.0} %, {m} cells), and mcp-connect is at {rest:.2}× of the floor + required work (±{:.0} %, {n} cells): what the rest of mcp-connect costs",
            work_error * 100.0,
            rest_error * 100.0,
        );
    }
    if let Some((scaled, error, n)) = pool(Kind::Seeded, &|_| Kind::Empty) {
        let _ = writeln!(
            out,
            "- S6 over its {n} cells at once (the same measure): the seeded database at {scaled:.2}× of the empty one's throughput (±{:.0} %)",
            error * 100.0,
        );
    }
    out
}

/// S2's and S3's targets read a second time in S6's conditions: the empty
/// side against the bare rmcp + SQL started with it (S1–S5's servers
/// stopped), each cell and all of them at once.
fn floor_in_s6(results: &BTreeMap<Key, Summary>, levels: &[usize]) -> String {
    let cells: Vec<(Scenario, usize, f64, f64, Option<f64>)> = scale::FLOORED
        .iter()
        .flat_map(|&sc| levels.iter().map(move |&l| (sc, l)))
        .filter_map(|(sc, l)| {
            let ours = results.get(&(sc, l, Kind::Empty))?;
            let floor = results.get(&(sc, l, Kind::EmptyFloor))?;
            Some((
                sc,
                l,
                ours.rate / floor.rate,
                cpu(ours) / cpu(floor) - 1.0,
                crate::report::ratio_error(&ours.rates, &floor.rates),
            ))
        })
        .collect();
    if cells.is_empty() {
        return String::new();
    }
    let ok = cells.iter().all(|c| c.2 >= 0.95 && c.3 <= 0.10);
    let detail: Vec<String> = cells
        .iter()
        .map(|(sc, l, r, c, _)| {
            format!(
                "{} {r:.2}× at {l} ({:+.0}% CPU per request)",
                sc.id(),
                c * 100.0
            )
        })
        .collect();
    let logs: Vec<(f64, f64)> = cells
        .iter()
        .filter_map(|c| Some((c.2.ln(), c.4?)))
        .collect();
    let pooled = match geometric_mean(&logs) {
        None => String::new(),
        Some((ratio, error)) => format!(
            "; all {} cells at once {ratio:.2}× (±{:.0} %)",
            logs.len(),
            error * 100.0
        ),
    };
    format!(
        "- {} S2 and S3 ≥ 0.95× the floor read again in S6's conditions (mcp-connect, empty ÷ a bare rmcp + SQL started with it on an empty database of its own, S1–S5's servers stopped, measured in turn): {}{pooled}\n",
        mark(ok),
        detail.join(", ")
    )
}

/// Cells' ratios pooled: given each cell's log ratio with its standard
/// error, their geometric mean and its standard error (`None` for no
/// cells).
fn geometric_mean(log_ratios: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = log_ratios.len() as f64;
    (!log_ratios.is_empty()).then(|| {
        let mean = log_ratios.iter().map(|c| c.0).sum::<f64>() / n;
        let error = log_ratios.iter().map(|c| c.1 * c.1).sum::<f64>().sqrt() / n;
        (mean.exp(), error)
    })
}

/// The share of its floor's throughput a scenario's target asks for: 0.9×
/// for S4 (whose floor includes the provider's answer), 0.95× for the rest.
fn throughput_bar(scenario: Scenario) -> f64 {
    if scenario == Scenario::CallAsUser {
        0.90
    } else {
        0.95
    }
}

/// One level of [`required_work`]: the floor + required work ÷ the floor,
/// mcp-connect ÷ the floor + required work, and their CPU per request.
struct RequiredCell {
    level: usize,
    work: f64,
    work_cpu: f64,
    rest: f64,
    rest_cpu: f64,
}

/// What Postgres alone makes of the seeded database: the connection lookup
/// by itself on both (see `lookup`).
fn lookup_line(lookup: &Result<Lookup, String>) -> String {
    match lookup {
        Ok(l) => format!(
            "the connection lookup alone (S3's and S4's one statement, S2's first; pgbench, {} clients, prepared, \
             {} rounds in turn) runs at {:.2}× on the seeded database of its rate on the empty one \
             ({:.0} against {:.0} statements/s; it reads {} pages of tables and indexes there, {} on the empty one): \
             what a million connections cost Postgres itself",
            l.clients,
            l.seeded.len(),
            l.ratio(),
            median(&l.seeded),
            median(&l.empty),
            l.pages.0,
            l.pages.1,
        ),
        Err(why) => format!("the connection lookup alone was not measured ({why})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quarter_hour_is_met_below_nine_hundred_seconds() {
        use std::time::Duration;
        assert_eq!(
            quarter_hour(Duration::from_secs_f64(806.4)),
            "- ✅ The full run within 15 minutes after the build: 806 s\n"
        );
        assert!(quarter_hour(Duration::from_secs(900)).starts_with("- ❌"));
    }

    #[test]
    fn cells_pool_to_the_geometric_mean_of_their_ratios() {
        assert_eq!(geometric_mean(&[]), None);
        let (ratio, error) = geometric_mean(&[(2f64.ln(), 0.03), (0.5f64.ln(), 0.04)]).unwrap();
        assert!((ratio - 1.0).abs() < 1e-12, "{ratio}");
        assert!((error - 0.025).abs() < 1e-12, "{error}");
        let (ratio, _) = geometric_mean(&[(0.9f64.ln(), 0.0)]).unwrap();
        assert!((ratio - 0.9).abs() < 1e-12, "{ratio}");
    }

    fn cell(spread: Option<f64>) -> Summary {
        Summary {
            rate: 1000.0,
            p50: 1.0,
            p99: 2.0,
            errors: 0,
            cpu_per_k: 0.1,
            db_cpu_per_k: None,
            rss_mb: None,
            gen_cpu_per_k: 0.01,
            dry: false,
            builds: 0,
            samples: Vec::new(),
            spread,
            rates: Vec::new(),
        }
    }

    #[test]
    fn the_noise_line_gives_the_typical_and_the_widest_spread() {
        let mut results = BTreeMap::new();
        results.insert((Scenario::Discover, 1, Kind::Ours), cell(Some(0.02)));
        results.insert((Scenario::Discover, 16, Kind::Bare), cell(Some(0.04)));
        results.insert((Scenario::RetryComplete, 64, Kind::Ours), cell(Some(0.30)));
        // One round only: no spread to speak of, not counted.
        results.insert((Scenario::Ask, 1, Kind::Python), cell(None));
        let line = noise(&results);
        assert!(line.contains("by 4 % (median over 3 cells"), "{line}");
        assert!(
            line.contains("up to 30 % (S3 at 64, mcp-connect)"),
            "{line}"
        );
    }

    #[test]
    fn the_noise_line_says_how_well_the_rounds_pin_a_ratio_down() {
        let rounds = |rates: &[f64]| Summary {
            rates: rates.to_vec(),
            ..cell(Some(0.2))
        };
        let mut results = BTreeMap::new();
        // Ratios of 0.9, 1.0 and 1.1 round by round: ±7 %.
        results.insert(
            (Scenario::RetryComplete, 16, Kind::Ours),
            rounds(&[900.0, 1000.0, 1100.0]),
        );
        results.insert(
            (Scenario::RetryComplete, 16, Kind::BareSql),
            rounds(&[1000.0; 3]),
        );
        let line = noise(&results);
        assert!(
            line.contains("is known to ±7 % (one standard error"),
            "{line}"
        );
        assert!(line.contains("median over 1 pairs of S1–S4"), "{line}");
    }

    #[test]
    fn no_cell_with_rounds_no_noise_line() {
        let mut results = BTreeMap::new();
        results.insert((Scenario::Ask, 1, Kind::Python), cell(None));
        assert_eq!(noise(&results), "");
    }

    #[test]
    fn the_required_work_is_judged_against_each_scenarios_own_bar() {
        let rate = |rate| Summary { rate, ..cell(None) };
        let mut results = BTreeMap::new();
        for (scenario, floor) in [
            (Scenario::Ask, Kind::BareSql),
            (Scenario::CallAsUser, Kind::BareSql),
        ] {
            results.insert((scenario, 64, floor), rate(1000.0));
            // The work alone leaves 0.92× of the floor: out of reach of
            // S2's 0.95×, within reach of S4's 0.9×.
            results.insert((scenario, 64, Kind::Required), rate(920.0));
            results.insert((scenario, 64, Kind::Ours), rate(900.0));
        }
        let lines = required_work(&results, &[64]);
        let line = |id: &str| {
            lines
                .lines()
                .find(|l| l.starts_with(&format!("- What {id}'s")))
                .unwrap_or_default()
                .to_owned()
        };
        assert!(
            line("S2").ends_with("under the 0.95× bar at 64 — there the target is out of reach for any server that does this work"),
            "{lines}"
        );
        assert!(
            line("S4").ends_with("the work leaves the 0.90× bar within reach at every level"),
            "{lines}"
        );
        assert!(
            line("S4").contains("mcp-connect is at 0.98× at 64"),
            "{lines}"
        );
    }

    #[test]
    fn s6s_floor_reads_the_empty_side_against_the_floor_started_with_it() {
        let rate = |rate, rates: &[f64]| Summary {
            rate,
            rates: rates.to_vec(),
            ..cell(None)
        };
        let mut results = BTreeMap::new();
        assert_eq!(floor_in_s6(&results, &[1, 16]), "", "no floor, no line");
        for level in [1, 16] {
            results.insert(
                (Scenario::Ask, level, Kind::Empty),
                rate(960.0, &[960.0; 4]),
            );
            results.insert(
                (Scenario::Ask, level, Kind::EmptyFloor),
                rate(1000.0, &[1000.0; 4]),
            );
        }
        // The main phase's rows are not S6's: they change nothing here.
        results.insert((Scenario::Ask, 1, Kind::Ours), rate(10.0, &[10.0; 4]));
        let line = floor_in_s6(&results, &[1, 16]);
        assert!(line.starts_with("- ✅ S2 and S3"), "{line}");
        assert!(
            line.contains("S2 0.96× at 1 (+0% CPU per request), S2 0.96× at 16"),
            "{line}"
        );
        assert!(line.contains("all 2 cells at once 0.96× (±0 %)"), "{line}");
        results.insert(
            (Scenario::RetryComplete, 16, Kind::Empty),
            rate(900.0, &[900.0; 4]),
        );
        results.insert(
            (Scenario::RetryComplete, 16, Kind::EmptyFloor),
            rate(1000.0, &[1000.0; 4]),
        );
        let line = floor_in_s6(&results, &[1, 16]);
        assert!(line.starts_with("- ❌ S2 and S3"), "{line}");
        assert!(line.contains("S3 0.90× at 16"), "{line}");
    }

    #[test]
    fn the_pooled_line_is_the_geometric_mean_of_the_cells_with_its_error() {
        let rounds = |rates: &[f64]| {
            let mut sorted = rates.to_vec();
            sorted.sort_by(f64::total_cmp);
            Summary {
                rate: sorted[sorted.len() / 2],
                rates: rates.to_vec(),
                ..cell(None)
            }
        };
        let mut results = BTreeMap::new();
        // S3 at 16: mcp-connect at 0.9× of the floor + required work, which
        // is at 0.9× of its floor, in every round; S1 at 1: both at 1.0×.
        results.insert(
            (Scenario::RetryComplete, 16, Kind::Ours),
            rounds(&[810.0, 810.0, 810.0]),
        );
        results.insert(
            (Scenario::RetryComplete, 16, Kind::Required),
            rounds(&[900.0, 900.0, 900.0]),
        );
        results.insert(
            (Scenario::RetryComplete, 16, Kind::BareSql),
            rounds(&[1000.0, 1000.0, 1000.0]),
        );
        results.insert(
            (Scenario::Discover, 1, Kind::Ours),
            rounds(&[900.0, 1000.0, 1100.0]),
        );
        results.insert(
            (Scenario::Discover, 1, Kind::Required),
            rounds(&[1000.0; 3]),
        );
        results.insert((Scenario::Discover, 1, Kind::Bare), rounds(&[1000.0; 3]));
        let line = pooled(&results);
        // √(0.9 · 1.0) = 0.95 both ways; the S1 cell's ±7.3 % over two cells.
        assert!(
            line.contains("takes the floors to 0.95× of their throughput (±0 %, 2 cells)"),
            "{line}"
        );
        assert!(
            line.contains("mcp-connect is at 0.95× of the floor + required work (±4 %, 2 cells)"),
            "{line}"
        );
        assert!(!line.contains("S6 over"), "{line}");
        assert_eq!(pooled(&BTreeMap::new()), "");
        let mut scaled = BTreeMap::new();
        scaled.insert(
            (Scenario::Ask, 64, Kind::Seeded),
            rounds(&[800.0, 810.0, 790.0]),
        );
        scaled.insert((Scenario::Ask, 64, Kind::Empty), rounds(&[1000.0; 3]));
        let line = pooled(&scaled);
        assert!(line.contains("S6 over its 1 cells at once (the same measure): the seeded database at 0.80× of the empty one's throughput (±1 %)"), "{line}");
    }
}
