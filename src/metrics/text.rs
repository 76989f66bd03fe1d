//! The Prometheus text exposition format (version 0.0.4): a `# HELP` and a
//! `# TYPE` line per metric family, then one `name{labels} value` line per
//! sample. Label values come from the fixed lists in `labels` (and the
//! crate's version), so they are only escaped as a matter of form.

use std::fmt::Write;

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Builds the exposition text.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts a metric family.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample: `name{k="v",…} value`. Counts are passed as `f64` too
    /// (exact up to 2^53), which prints whole numbers without a fraction.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(key);
                self.out.push_str("=\"");
                escape_into(&mut self.out, value);
                self.out.push('"');
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// Label value escaping of the text format: backslash, double quote, newline.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_samples_are_written_in_the_text_format() {
        let mut e = Exposition::default();
        e.family("x_total", Kind::Counter, "Things.");
        e.sample("x_total", &[("a", "b"), ("c", "d")], 3.0);
        e.sample("x_total", &[], 0.25);
        assert_eq!(
            e.finish(),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"b\",c=\"d\"} 3\nx_total 0.25\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut e = Exposition::default();
        e.sample("x", &[("v", "a\"b\\c\nd")], 1.0);
        assert_eq!(e.finish(), "x{v=\"a\\\"b\\\\c\\nd\"} 1\n");
    }
}
