//! The pipeds' own metrics (what each sends with ReportStat, in the Prometheus text
//! format) re-exported on `/metrics`, each sample labelled with the project and piped it
//! came from, as upstream's control plane does.
//!
//! The text comes from pipeds, so it is treated as untrusted: every line is checked with
//! a Prometheus line parser and dropped when it does not parse; families named like Wisp's
//! own (`wisp_…`) are dropped; the labels `project_id` and `piped_id` are always the
//! authenticated ones; and the sizes are bounded ([`MAX_BYTES_PER_PIPED`],
//! [`MAX_BYTES`]). The families of all pipeds are merged, so that each family's lines
//! stay together as the format requires.

use std::collections::HashMap;
use std::fmt::Write as _;

use prometheus_parse::LineInfo;

pub use crate::{
    PIPED_METRICS_MAX_BYTES as MAX_BYTES, PIPED_METRICS_MAX_BYTES_PER_PIPED as MAX_BYTES_PER_PIPED,
};

pub use crate::PipedMetrics;

/// What [`render`] left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Pipeds whose text was too large, not UTF-8, or past [`MAX_BYTES`].
    pub pipeds: usize,
    /// Lines that did not parse or named a `wisp_…` family.
    pub lines: usize,
}

#[derive(Default)]
struct Family {
    help: Option<String>,
    kind: Option<String>,
    samples: Vec<String>,
}

/// The pipeds' metrics as one Prometheus text document.
pub fn render(pipeds: &[PipedMetrics]) -> (String, Skipped) {
    let mut order: Vec<String> = Vec::new();
    let mut families: HashMap<String, Family> = HashMap::new();
    let mut skipped = Skipped::default();
    let mut total = 0usize;
    for piped in pipeds {
        let Ok(text) = std::str::from_utf8(&piped.text) else {
            skipped.pipeds += 1;
            continue;
        };
        if !crate::piped_metrics_fit(total, text.len()) {
            skipped.pipeds += 1;
            continue;
        }
        total += text.len();
        let ours = [
            ("project_id", piped.project_id.as_str()),
            ("piped_id", piped.piped_id.as_str()),
        ];
        // The family a sample belongs to: the last TYPE or HELP line's name, when the
        // sample's name extends it (`x_bucket` of `x`); else a family of its own.
        let mut current: Option<String> = None;
        for line in text.lines() {
            match LineInfo::parse(line) {
                LineInfo::Doc { metric_name, doc } => {
                    if !valid_name(metric_name) || metric_name.starts_with("wisp_") {
                        skipped.lines += 1;
                        current = None;
                        continue;
                    }
                    let family = family_entry(&mut families, &mut order, metric_name);
                    family.help.get_or_insert_with(|| doc.to_string());
                    current = Some(metric_name.to_string());
                }
                LineInfo::Type {
                    metric_name,
                    metric_alias,
                    ..
                } => {
                    // The parser names a histogram's family by its buckets; the alias is
                    // the family's own name.
                    let metric_name = metric_alias.unwrap_or(metric_name);
                    let kind = line.split_whitespace().nth(3).unwrap_or("untyped");
                    if !valid_name(&metric_name)
                        || metric_name.starts_with("wisp_")
                        || !matches!(
                            kind,
                            "counter" | "gauge" | "histogram" | "summary" | "untyped"
                        )
                    {
                        skipped.lines += 1;
                        current = None;
                        continue;
                    }
                    let family = family_entry(&mut families, &mut order, &metric_name);
                    family.kind.get_or_insert_with(|| kind.to_string());
                    current = Some(metric_name);
                }
                LineInfo::Sample {
                    metric_name,
                    labels,
                    value,
                    ..
                } => {
                    let labels = match labels.map(parse_labels) {
                        None => Vec::new(),
                        Some(Some(labels)) => labels,
                        Some(None) => {
                            skipped.lines += 1;
                            continue;
                        }
                    };
                    if !valid_name(metric_name)
                        || metric_name.starts_with("wisp_")
                        || value.parse::<f64>().is_err() && !is_special_float(value)
                    {
                        skipped.lines += 1;
                        continue;
                    }
                    let family_name = match &current {
                        Some(name) if metric_name.starts_with(name.as_str()) => name.clone(),
                        _ => metric_name.to_string(),
                    };
                    let mut sample = String::with_capacity(line.len() + 80);
                    sample.push_str(metric_name);
                    sample.push('{');
                    let mut first = true;
                    for (name, value) in ours.iter().copied().chain(
                        labels
                            .iter()
                            .filter(|(n, _)| n != "project_id" && n != "piped_id")
                            .map(|(n, v)| (n.as_str(), v.as_str())),
                    ) {
                        if !first {
                            sample.push(',');
                        }
                        first = false;
                        let _ = write!(sample, "{name}=\"{}\"", escape(value));
                    }
                    sample.push_str("} ");
                    sample.push_str(value);
                    family_entry(&mut families, &mut order, &family_name)
                        .samples
                        .push(sample);
                }
                LineInfo::Empty | LineInfo::Ignored => {}
            }
        }
    }
    let mut out = String::new();
    for name in order {
        let Some(family) = families.remove(&name) else {
            continue;
        };
        if family.samples.is_empty() {
            continue;
        }
        if let Some(help) = &family.help {
            let _ = writeln!(out, "# HELP {name} {}", help.replace('\n', " "));
        }
        if let Some(kind) = &family.kind {
            let _ = writeln!(out, "# TYPE {name} {kind}");
        }
        for sample in &family.samples {
            out.push_str(sample);
            out.push('\n');
        }
    }
    (out, skipped)
}

fn family_entry<'a>(
    families: &'a mut HashMap<String, Family>,
    order: &mut Vec<String>,
    name: &str,
) -> &'a mut Family {
    if !families.contains_key(name) {
        order.push(name.to_string());
    }
    families.entry(name.to_string()).or_default()
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, the format's metric and label names.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_special_float(value: &str) -> bool {
    matches!(value, "+Inf" | "-Inf" | "NaN")
}

/// `a="x",b="y"` (the text between the braces); `None` when it is not that.
fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut labels = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let name = name.trim();
        if !valid_name(name) || name.contains(':') {
            return None;
        }
        let after = after.trim_start();
        if !after.starts_with('"') {
            return None;
        }
        let mut value = String::new();
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices().skip(1) {
            match (escaped, c) {
                (true, 'n') => {
                    value.push('\n');
                    escaped = false;
                }
                (true, c) => {
                    value.push(c);
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, c) => value.push(c),
            }
        }
        let end = end?;
        labels.push((name.to_string(), value));
        rest = after[end + 1..].trim_start();
        rest = match rest.strip_prefix(',') {
            Some(more) => more.trim_start(),
            None if rest.is_empty() => rest,
            None => return None,
        };
    }
    Some(labels)
}

/// A label value as the format writes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piped(id: &str, text: &str) -> PipedMetrics {
        PipedMetrics {
            project_id: "quickstart".into(),
            piped_id: id.into(),
            text: text.as_bytes().to_vec(),
        }
    }

    const PIPED_TEXT: &str = "\
# HELP deployments_total Deployments handled.
# TYPE deployments_total counter
deployments_total{status=\"ok\"} 3
deployments_total{status=\"failed\"} 1
# HELP plan_seconds Planning time.
# TYPE plan_seconds histogram
plan_seconds_bucket{le=\"1\"} 2
plan_seconds_bucket{le=\"+Inf\"} 4
plan_seconds_sum 5.5
plan_seconds_count 4
go_goroutines 42
";

    #[test]
    fn samples_are_labelled_and_families_merged() {
        let (text, skipped) = render(&[piped("p1", PIPED_TEXT), piped("p2", PIPED_TEXT)]);
        assert_eq!(skipped, Skipped::default());
        // Each family once, its samples together, from both pipeds.
        assert_eq!(text.matches("# TYPE deployments_total counter").count(), 1);
        assert_eq!(text.matches("# TYPE plan_seconds histogram").count(), 1);
        assert!(text.contains(
            "deployments_total{project_id=\"quickstart\",piped_id=\"p2\",status=\"failed\"} 1\n"
        ));
        assert!(text.contains("plan_seconds_sum{project_id=\"quickstart\",piped_id=\"p1\"} 5.5\n"));
        assert!(text.contains("go_goroutines{project_id=\"quickstart\",piped_id=\"p2\"} 42\n"));
        let plan = text.find("# TYPE plan_seconds").unwrap();
        let goroutines = text.find("go_goroutines").unwrap();
        let last_plan_sample = text.rfind("plan_seconds_count").unwrap();
        assert!(
            plan < last_plan_sample && last_plan_sample < goroutines,
            "{text}"
        );

        // What a Prometheus parser reads back.
        let scrape =
            prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        let failed: Vec<_> = scrape
            .samples
            .iter()
            .filter(|s| s.metric == "deployments_total" && s.labels.get("status") == Some("failed"))
            .collect();
        assert_eq!(failed.len(), 2);
        assert!(
            failed
                .iter()
                .any(|s| s.labels.get("piped_id") == Some("p1"))
        );
    }

    #[test]
    fn hostile_text_is_dropped_line_by_line() {
        let text = "\
# TYPE wisp_grpc_requests_total counter
wisp_grpc_requests_total{code=\"OK\"} 1e9
ok_metric{piped_id=\"someone-else\",project_id=\"other\",a=\"x\\\"y\"} 1
bad metric line
broken{a=\"unterminated} 1
nan_metric NaN
not_a_number{a=\"b\"} twelve
";
        let (out, skipped) = render(&[piped("p1", text)]);
        assert!(!out.contains("wisp_"), "{out}");
        // The piped cannot claim another identity.
        assert!(
            out.contains("ok_metric{project_id=\"quickstart\",piped_id=\"p1\",a=\"x\\\"y\"} 1\n"),
            "{out}"
        );
        assert!(out.contains("nan_metric{project_id=\"quickstart\",piped_id=\"p1\"} NaN\n"));
        assert_eq!(skipped.lines, 5, "{out}");
    }

    #[test]
    fn sizes_are_bounded() {
        let big = "m 1\n".repeat(MAX_BYTES_PER_PIPED / 4 + 1);
        let not_utf8 = PipedMetrics {
            text: vec![0xff, 0xfe],
            ..piped("p3", "")
        };
        let (out, skipped) = render(&[piped("p1", &big), piped("p2", "m 1\n"), not_utf8]);
        assert_eq!(skipped.pipeds, 2);
        assert_eq!(out, "m{project_id=\"quickstart\",piped_id=\"p2\"} 1\n");
    }
}
