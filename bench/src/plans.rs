//! The plan check of S6: every statement the service ran on its request
//! paths (read from its own statement log, `sqlx::query` at trace) and in
//! a sweep (gathered as sqlx logs them, `statement_log`), and the lookup
//! Postgres makes on the referencing table of every foreign key when a
//! referenced row is deleted (what the sweeper's and the request paths'
//! deletes cost), EXPLAINed on the seeded database (`bench/sql/explain.sql`).
//! A sequential scan of a table of the service fails the run when no index
//! can serve the statement, or when the table is large and the planner
//! chose it anyway; on a small table with a usable index it is noted only.

use std::{collections::BTreeMap, fmt::Write as _, path::Path};

use serde_json::Value;

use crate::psql::{self, Script};

/// Tables below this many rows may be scanned sequentially by choice.
const SMALL_TABLE: f64 = 10_000.0;

pub struct Statement {
    /// Where it comes from, for the message.
    pub origin: String,
    pub sql: String,
}

/// The statements `sqlx::query` logged (JSON lines, fields flattened or
/// under `fields`), each once, in order of first appearance.
pub fn logged(log: &str) -> Vec<Statement> {
    let mut seen: Vec<Statement> = Vec::new();
    for line in log.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["target"] != "sqlx::query" {
            continue;
        }
        let fields = if event["fields"].is_object() {
            &event["fields"]
        } else {
            &event
        };
        let text = [&fields["db.statement"], &fields["summary"]]
            .into_iter()
            .filter_map(Value::as_str)
            .map(str::trim)
            .find(|s| !s.is_empty());
        if let Some(sql) = text
            && !seen.iter().any(|s| s.sql == sql)
        {
            seen.push(Statement {
                origin: "request path".to_owned(),
                sql: sql.to_owned(),
            });
        }
    }
    seen
}

/// Statements that are not plannable queries (BEGIN, SET, LISTEN, DDL …):
/// nothing to check.
fn is_utility(sql: &str) -> bool {
    let first = sql
        .split(|c: char| c.is_whitespace() || c == '(')
        .find(|w| !w.is_empty())
        .unwrap_or_default()
        .to_ascii_uppercase();
    !matches!(
        first.as_str(),
        "SELECT" | "INSERT" | "UPDATE" | "DELETE" | "WITH" | "VALUES" | "MERGE" | "TABLE"
    )
}

/// The relations a plan (EXPLAIN (FORMAT JSON) output, any depth of
/// `Plans`: subplans, CTEs and init plans included) reads with a
/// sequential scan.
pub fn seq_scans(explain: &Value) -> Vec<String> {
    fn walk(node: &Value, out: &mut Vec<String>) {
        if node["Node Type"] == "Seq Scan"
            && let Some(name) = node["Relation Name"].as_str()
            && !out.iter().any(|n| n == name)
        {
            out.push(name.to_owned());
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            walk(child, out);
        }
    }
    let mut out = Vec::new();
    for top in explain.as_array().into_iter().flatten() {
        walk(&top["Plan"], &mut out);
    }
    out
}

/// The lookups behind every foreign key of the service's tables.
pub async fn foreign_key_lookups(url: &str) -> anyhow::Result<Vec<Statement>> {
    let rows = psql::run(
        url,
        &[],
        Script::Command(
            "SELECT c.conrelid::regclass, f.confrelid_name, string_agg(format('%I = $%s', a.attname, k.n), ' AND ' ORDER BY k.n)
             FROM pg_constraint c
             CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k (attnum, n)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
             CROSS JOIN LATERAL (SELECT c.confrelid::regclass::text AS confrelid_name) f
             WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
             GROUP BY c.oid, c.conrelid, f.confrelid_name ORDER BY 1, 2",
        ),
    )
    .await?;
    Ok(rows
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, '|');
            let (table, parent, cond) = (f.next()?, f.next()?, f.next()?);
            Some(Statement {
                origin: format!(
                    "foreign key {table} → {parent}: run for each {parent} row deleted"
                ),
                sql: format!("SELECT 1 FROM ONLY {table} x WHERE {cond} FOR KEY SHARE OF x"),
            })
        })
        .collect())
}

/// What the check found about one statement.
pub enum Finding {
    /// A sequential scan no index can replace.
    NoIndex { table: String },
    /// The planner's choice on a large table (rows).
    LargeTable { table: String, rows: f64 },
    /// A small table read sequentially although an index exists: noted.
    SmallTable { table: String, rows: f64 },
    /// Could not be EXPLAINed.
    Error(String),
}

pub struct Checked {
    pub statements: usize,
    pub findings: Vec<(usize, Finding)>,
    pub list: Vec<Statement>,
}

impl Checked {
    /// Findings that fail the run.
    pub fn failures(&self) -> usize {
        self.findings
            .iter()
            .filter(|(_, f)| matches!(f, Finding::NoIndex { .. } | Finding::LargeTable { .. }))
            .count()
    }
}

/// Sorts one statement's EXPLAIN result (`{plan, forced}` or `{error}`)
/// into findings; `rows` are the tables' estimated row counts.
pub fn judge(result: &Value, rows: &BTreeMap<String, f64>) -> Vec<Finding> {
    if let Some(e) = result["error"].as_str() {
        return vec![Finding::Error(e.to_owned())];
    }
    let forced = seq_scans(&result["forced"]);
    seq_scans(&result["plan"])
        .into_iter()
        .chain(forced.iter().cloned())
        .fold(Vec::<String>::new(), |mut all, t| {
            if !all.contains(&t) {
                all.push(t);
            }
            all
        })
        .into_iter()
        .filter_map(|table| {
            // Only the service's tables (catalogs and the like are not).
            let n = *rows.get(&table)?;
            Some(if forced.contains(&table) {
                Finding::NoIndex { table }
            } else if n >= SMALL_TABLE {
                Finding::LargeTable { table, rows: n }
            } else {
                Finding::SmallTable { table, rows: n }
            })
        })
        .collect()
}

/// EXPLAINs `statements` on the database at `url`.
pub async fn check(url: &str, root: &Path, statements: Vec<Statement>) -> anyhow::Result<Checked> {
    let list: Vec<Statement> = statements
        .into_iter()
        .filter(|s| !is_utility(&s.sql))
        .collect();
    let mut script = std::fs::read_to_string(root.join("bench/sql/explain.sql"))?;
    script.push_str(
        "\nSELECT jsonb_object_agg(relname, reltuples) FROM pg_class
         WHERE relnamespace = 'public'::regnamespace AND relkind = 'r';\n",
    );
    for s in &list {
        let _ = writeln!(
            script,
            "SELECT pg_temp.bench_explain($bench_q${}$bench_q$);",
            s.sql
        );
    }
    let out = psql::run(url, &[], Script::Stdin(&script)).await?;
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    let rows: BTreeMap<String, f64> = serde_json::from_str(lines.next().unwrap_or("{}"))?;
    // Only the service's tables count: not the harness's own yardstick.
    let rows: BTreeMap<String, f64> = rows
        .into_iter()
        .filter(|(t, _)| !t.starts_with("bench_") && !t.starts_with("_sqlx"))
        .map(|(t, n)| (t, n.max(0.0)))
        .collect();
    let mut findings = Vec::new();
    for (i, line) in lines.enumerate() {
        let result: Value = serde_json::from_str(line)?;
        findings.extend(judge(&result, &rows).into_iter().map(|f| (i, f)));
    }
    Ok(Checked {
        statements: list.len(),
        findings,
        list,
    })
}

/// One line per finding, naming the statement.
pub fn describe(checked: &Checked) -> String {
    let mut out = String::new();
    for (i, finding) in &checked.findings {
        let s = &checked.list[*i];
        let sql: String = s.sql.split_whitespace().collect::<Vec<_>>().join(" ");
        let what = match finding {
            Finding::NoIndex { table } => {
                format!("❌ sequential scan of `{table}` and no index can serve it")
            }
            Finding::LargeTable { table, rows } => {
                format!("❌ sequential scan of `{table}` ({rows:.0} rows) chosen by the planner")
            }
            Finding::SmallTable { table, rows } => format!(
                "note: sequential scan of the small table `{table}` ({rows:.0} rows; an index exists)"
            ),
            Finding::Error(e) => format!("⚠ not EXPLAINed: {e}"),
        };
        let _ = writeln!(out, "- {what} — {} — `{sql}`", s.origin);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Trimmed from a real EXPLAIN (FORMAT JSON) of the ticket insert
    /// (CTEs as init plans) and of a foreign key lookup.
    fn sample(inner: &str, relation: &str) -> Value {
        json!([{ "Plan": {
            "Node Type": "ModifyTable", "Operation": "Insert", "Relation Name": "audit_events",
            "Plans": [
                { "Node Type": "Result", "Parent Relationship": "InitPlan", "Subplan Name": "CTE relaxed" },
                { "Node Type": "Nested Loop", "Parent Relationship": "Outer", "Plans": [
                    { "Node Type": "CTE Scan", "CTE Name": "ticket" },
                    { "Node Type": inner, "Relation Name": relation, "Alias": "x" }
                ]}
            ]
        }}])
    }

    #[test]
    fn finds_sequential_scans_at_any_depth_and_only_those() {
        assert_eq!(
            seq_scans(&sample("Seq Scan", "web_sessions")),
            ["web_sessions"]
        );
        assert!(seq_scans(&sample("Index Scan", "web_sessions")).is_empty());
        assert!(seq_scans(&sample("Bitmap Heap Scan", "connections")).is_empty());
        assert!(seq_scans(&json!({"error": "x"})).is_empty());
    }

    #[test]
    fn judges_by_index_and_table_size() {
        let rows = BTreeMap::from([
            ("web_sessions".to_owned(), 100_000.0),
            ("oauth_flows".to_owned(), 12.0),
        ]);
        let index = sample("Index Scan", "web_sessions");
        let no_index = json!({ "plan": sample("Seq Scan", "web_sessions"), "forced": sample("Seq Scan", "web_sessions") });
        assert!(matches!(
            judge(&no_index, &rows)[..],
            [Finding::NoIndex { .. }]
        ));
        let chosen = json!({ "plan": sample("Seq Scan", "web_sessions"), "forced": index });
        assert!(matches!(
            judge(&chosen, &rows)[..],
            [Finding::LargeTable { .. }]
        ));
        let small = json!({ "plan": sample("Seq Scan", "oauth_flows"), "forced": sample("Index Scan", "oauth_flows") });
        assert!(matches!(
            judge(&small, &rows)[..],
            [Finding::SmallTable { .. }]
        ));
        let catalog = json!({ "plan": sample("Seq Scan", "pg_class"), "forced": sample("Seq Scan", "pg_class") });
        assert!(judge(&catalog, &rows).is_empty());
        assert!(matches!(
            judge(&json!({"error": "no"}), &rows)[..],
            [Finding::Error(_)]
        ));
    }

    #[test]
    fn reads_statements_from_the_service_log() {
        let log = [
            r#"{"level":"TRACE","target":"sqlx::query","summary":"SELECT id, issuer …","db.statement":"\n\nSELECT id, issuer FROM connections WHERE id = $1\n"}"#,
            r#"{"level":"TRACE","target":"sqlx::query","summary":"BEGIN","db.statement":""}"#,
            r#"{"level":"INFO","target":"mcp_connect::mcp","message":"request"}"#,
            r#"{"level":"TRACE","target":"sqlx::query","fields":{"summary":"SELECT id, issuer …","db.statement":"SELECT id, issuer FROM connections WHERE id = $1"}}"#,
            "not json",
        ]
        .join("\n");
        let found: Vec<String> = logged(&log).into_iter().map(|s| s.sql).collect();
        assert_eq!(
            found,
            ["SELECT id, issuer FROM connections WHERE id = $1", "BEGIN"]
        );
        assert!(is_utility("BEGIN") && is_utility("set local x = 1") && is_utility("LISTEN \"x\""));
        assert!(!is_utility("SELECT 1") && !is_utility("\n with a AS (SELECT 1) SELECT 2"));
    }

    /// On a database of its own on the test Postgres: a statement without
    /// parameters keeps the plan of its first EXECUTE, so the check must
    /// prepare it again before planning it with sequential scans off, or
    /// a seek the index serves is reported as one no index can serve.
    #[tokio::test]
    async fn a_statement_without_parameters_is_planned_again_with_sequential_scans_off()
    -> anyhow::Result<()> {
        let server = std::env::var("TEST_DATABASE_SERVER")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
        let name = format!("bench_plans_{}", uuid::Uuid::new_v4().simple());
        psql::value(
            &format!("{server}/postgres"),
            &format!("CREATE DATABASE {name}"),
        )
        .await?;
        let url = format!("{server}/{name}");
        let checked = async {
            psql::run(
                &url,
                &[],
                Script::Command(
                    "CREATE TABLE flows (id int, kind text, expires_at timestamptz);
                     CREATE INDEX flows_expires_at ON flows (expires_at);
                     INSERT INTO flows SELECT g, 'login', now() FROM generate_series(1, 16) g;
                     ANALYZE flows",
                ),
            )
            .await?;
            let statement = |sql: &str| Statement {
                origin: "test".to_owned(),
                sql: sql.to_owned(),
            };
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            check(
                &url,
                &root,
                vec![
                    statement("DELETE FROM flows WHERE kind = 'login' AND expires_at < now()"),
                    statement("DELETE FROM flows WHERE kind = 'login'"),
                ],
            )
            .await
        }
        .await;
        psql::value(
            &format!("{server}/postgres"),
            &format!("DROP DATABASE {name}"),
        )
        .await?;
        let checked = checked?;
        let no_index: Vec<usize> = checked
            .findings
            .iter()
            .filter(|(_, f)| matches!(f, Finding::NoIndex { .. }))
            .map(|(i, _)| *i)
            .collect();
        assert_eq!(no_index, [1], "{}", describe(&checked));
        Ok(())
    }
}
