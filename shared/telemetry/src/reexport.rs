//! The pipeds' own metrics (what each sends with ReportStat, in the Prometheus text
//! format) re-exported on `/metrics`, each sample labelled with the project and piped it
//! came from, as upstream's control plane does.
//!
//! The text comes from pipeds, so it is treated as hostile: one line Prometheus refuses
//! would make it drop the whole scrape, Wisp's own metrics with it. So every sample is
//! rebuilt from its parts, each checked as Prometheus checks it, and a line that fails a
//! check is dropped:
//!
//! - metric names `[a-zA-Z_:][a-zA-Z0-9_:]*`, label names `[a-zA-Z_][a-zA-Z0-9_]*`; names
//!   starting with `__` (reserved) and families named like Wisp's own (`wisp_…`) refused;
//!   a label named twice refused;
//! - values: a finite number, or exactly `+Inf`, `-Inf` or `NaN` (`1e999`, which Prometheus
//!   reads as out of range, is refused); timestamps are dropped;
//! - the labels `project_id` and `piped_id` are always the authenticated ones (a piped's
//!   own are replaced); a series repeated is kept once.
//!
//! HELP and TYPE are per project: a family's HELP (TYPE) line is written only when every
//! project with samples in it declared the same one, so that one project's piped cannot
//! describe another project's samples; otherwise the line is left out (the samples stay,
//! untyped) and the family is named in [`Skipped::undescribed`].
//!
//! Sizes are bounded: the text read ([`MAX_BYTES_PER_PIPED`], [`MAX_BYTES_PER_PROJECT`],
//! [`MAX_BYTES`]), and what is written, per project and in all ([`MAX_SERIES_PER_PROJECT`],
//! [`MAX_SERIES`], [`MAX_OUTPUT_BYTES_PER_PROJECT`], [`MAX_OUTPUT_BYTES`]), so that a scrape
//! holds at most a few tens of MiB whatever the pipeds send. Pipeds are taken in
//! (project, piped) order, so what is left out is the same from one scrape to the next.
//! The families of all pipeds are merged, so that each family's lines stay together as
//! the format requires.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};

use prometheus_parse::LineInfo;

pub use crate::{
    PIPED_METRICS_MAX_BYTES as MAX_BYTES, PIPED_METRICS_MAX_BYTES_PER_PIPED as MAX_BYTES_PER_PIPED,
    PIPED_METRICS_MAX_BYTES_PER_PROJECT as MAX_BYTES_PER_PROJECT,
};

pub use crate::PipedMetrics;

/// Series one project's pipeds may add to `/metrics`.
pub const MAX_SERIES_PER_PROJECT: usize = 20_000;
/// Series the pipeds may add to `/metrics` in all.
pub const MAX_SERIES: usize = 100_000;
/// Bytes of `/metrics` one project's pipeds' samples may take.
pub const MAX_OUTPUT_BYTES_PER_PROJECT: usize = 4 * 1024 * 1024;
/// Bytes of `/metrics` the pipeds' samples may take in all.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// Longest HELP text kept.
const MAX_HELP_BYTES: usize = 1024;

/// What [`render`] left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Pipeds whose text was too large, not UTF-8, or past [`MAX_BYTES_PER_PROJECT`] or
    /// [`MAX_BYTES`].
    pub pipeds: usize,
    /// Lines that did not parse, or that Prometheus would refuse, or that named a `wisp_…`
    /// family.
    pub lines: usize,
    /// Samples past a series or size bound, or repeating a series.
    pub samples: usize,
    /// Families written without HELP or TYPE because projects disagreed on them.
    pub undescribed: Vec<String>,
}

/// What one project declared for a family (the first declaration of its pipeds).
#[derive(Default)]
struct Declared {
    help: Option<String>,
    kind: Option<&'static str>,
}

#[derive(Default)]
struct Family {
    declared: BTreeMap<String, Declared>,
    /// Projects with samples in the family.
    sampled: BTreeSet<String>,
    samples: Vec<String>,
}

impl Family {
    /// The one value every project with samples declared; `Err` when some declared one
    /// and they do not all agree.
    fn agreed<T: Clone + PartialEq>(
        &self,
        get: impl Fn(&Declared) -> Option<T>,
    ) -> Result<Option<T>, ()> {
        let values: Vec<Option<T>> = self
            .sampled
            .iter()
            .map(|p| self.declared.get(p).and_then(&get))
            .collect();
        let Some(first) = values.first() else {
            return Ok(None);
        };
        if values.iter().all(|v| v == first) {
            Ok(first.clone())
        } else {
            Err(())
        }
    }
}

#[derive(Default)]
struct Usage {
    series: usize,
    bytes: usize,
}

/// The pipeds' metrics as one Prometheus text document.
pub fn render(pipeds: &[PipedMetrics]) -> (String, Skipped) {
    render_with(&[], pipeds)
}

/// [`render`] with the process's own unlabelled samples (`process_*`, which upstream
/// pipeds send too) in the same document: a family both have is written once, with
/// Wisp's HELP and TYPE, Wisp's sample, then the pipeds' samples of exactly that name
/// (others, such as a `_bucket` under a counter, are dropped), so that the family's
/// lines stay together as the format requires.
pub fn render_with(own: &[crate::process::Sample], pipeds: &[PipedMetrics]) -> (String, Skipped) {
    let mut sorted: Vec<&PipedMetrics> = pipeds.iter().collect();
    sorted.sort_by(|a, b| (&a.project_id, &a.piped_id).cmp(&(&b.project_id, &b.piped_id)));
    let mut order: Vec<String> = Vec::new();
    let mut families: HashMap<String, Family> = HashMap::new();
    let mut skipped = Skipped::default();
    let mut total = 0usize;
    let mut read_per_project: HashMap<&str, usize> = HashMap::new();
    let mut written = Usage::default();
    let mut written_per_project: HashMap<&str, Usage> = HashMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    for sample in own {
        family_entry(&mut families, &mut order, sample.name);
    }
    for piped in sorted {
        let project = piped.project_id.as_str();
        let Ok(text) = std::str::from_utf8(&piped.text) else {
            skipped.pipeds += 1;
            continue;
        };
        let read = read_per_project.entry(project).or_default();
        if !crate::piped_metrics_fit(total, *read, text.len()) {
            skipped.pipeds += 1;
            continue;
        }
        total += text.len();
        *read += text.len();
        let ours = [
            ("project_id", project),
            ("piped_id", piped.piped_id.as_str()),
        ];
        // The family a sample belongs to: the last TYPE or HELP line's name, when the
        // sample's name extends it (`x_bucket` of `x`); else a family of its own.
        let mut current: Option<String> = None;
        for line in text.lines() {
            match LineInfo::parse(line) {
                LineInfo::Doc { metric_name, doc } => {
                    if !valid_metric_name(metric_name) {
                        skipped.lines += 1;
                        current = None;
                        continue;
                    }
                    let family = family_entry(&mut families, &mut order, metric_name);
                    let declared = family.declared.entry(project.to_string()).or_default();
                    declared.help.get_or_insert_with(|| clean_help(doc));
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
                    let kind = match line.split_whitespace().nth(3) {
                        Some("counter") => "counter",
                        Some("gauge") => "gauge",
                        Some("histogram") => "histogram",
                        Some("summary") => "summary",
                        Some("untyped") => "untyped",
                        _ => {
                            skipped.lines += 1;
                            current = None;
                            continue;
                        }
                    };
                    if !valid_metric_name(&metric_name) {
                        skipped.lines += 1;
                        current = None;
                        continue;
                    }
                    let family = family_entry(&mut families, &mut order, &metric_name);
                    let declared = family.declared.entry(project.to_string()).or_default();
                    declared.kind.get_or_insert(kind);
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
                    if !valid_metric_name(metric_name) || !valid_value(value) {
                        skipped.lines += 1;
                        continue;
                    }
                    let sample = sample_line(metric_name, &ours, labels, value);
                    let series = {
                        let mut h = DefaultHasher::new();
                        sample[..sample.rfind('}').unwrap_or(0)].hash(&mut h);
                        h.finish()
                    };
                    let in_project = written_per_project.entry(project).or_default();
                    let len = sample.len() + 1;
                    if in_project.series >= MAX_SERIES_PER_PROJECT
                        || in_project.bytes + len > MAX_OUTPUT_BYTES_PER_PROJECT
                        || written.series >= MAX_SERIES
                        || written.bytes + len > MAX_OUTPUT_BYTES
                        || !seen.insert(series)
                    {
                        skipped.samples += 1;
                        continue;
                    }
                    in_project.series += 1;
                    in_project.bytes += len;
                    written.series += 1;
                    written.bytes += len;
                    let family_name = match &current {
                        Some(name) if metric_name.starts_with(name.as_str()) => name.clone(),
                        _ => metric_name.to_string(),
                    };
                    let family = family_entry(&mut families, &mut order, &family_name);
                    if !family.sampled.contains(project) {
                        family.sampled.insert(project.to_string());
                    }
                    family.samples.push(sample);
                }
                LineInfo::Empty | LineInfo::Ignored => {}
            }
        }
    }
    let mut out = String::with_capacity(written.bytes + 1024);
    for name in order {
        let Some(family) = families.remove(&name) else {
            continue;
        };
        if let Some(mine) = own.iter().find(|o| o.name == name) {
            mine.write(&mut out);
            let exact = format!("{name}{{");
            for sample in &family.samples {
                if sample.starts_with(&exact) {
                    out.push_str(sample);
                    out.push('\n');
                } else {
                    skipped.samples += 1;
                }
            }
            continue;
        }
        if family.samples.is_empty() {
            continue;
        }
        let help = family.agreed(|d| d.help.clone());
        let kind = family.agreed(|d| d.kind);
        if help.is_err() || kind.is_err() {
            skipped.undescribed.push(name.clone());
        }
        if let Ok(Some(help)) = help {
            let _ = writeln!(out, "# HELP {name} {help}");
        }
        if let Ok(Some(kind)) = kind {
            let _ = writeln!(out, "# TYPE {name} {kind}");
        }
        for sample in &family.samples {
            out.push_str(sample);
            out.push('\n');
        }
    }
    (out, skipped)
}

/// `name{project_id="…",piped_id="…",a="…",…} value`: Wisp's labels first, then the
/// piped's in name order (Prometheus does not care for the order; one order makes a
/// repeated series recognisable).
fn sample_line(
    name: &str,
    ours: &[(&str, &str); 2],
    mut labels: Vec<(String, String)>,
    value: &str,
) -> String {
    labels.retain(|(n, _)| n != "project_id" && n != "piped_id");
    labels.sort();
    let mut sample = String::with_capacity(name.len() + value.len() + 80);
    sample.push_str(name);
    sample.push('{');
    let mut first = true;
    for (name, value) in ours
        .iter()
        .copied()
        .chain(labels.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    {
        if !first {
            sample.push(',');
        }
        first = false;
        let _ = write!(sample, "{name}=\"{}\"", escape(value));
    }
    sample.push_str("} ");
    sample.push_str(value);
    sample
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

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, the format's metric names.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A metric name a piped may use: legal, not reserved (`__…`), not one of Wisp's own.
fn valid_metric_name(name: &str) -> bool {
    valid_name(name) && !name.starts_with("__") && !name.starts_with("wisp_")
}

/// A label name a piped may use: `[a-zA-Z_][a-zA-Z0-9_]*`, not reserved (`__…`).
fn valid_label_name(name: &str) -> bool {
    valid_name(name) && !name.contains(':') && !name.starts_with("__")
}

/// A finite number, or one of the format's spellings of the special values. Prometheus
/// reads `1e999` as out of range and drops the scrape, so it is refused here.
fn valid_value(value: &str) -> bool {
    if matches!(value, "+Inf" | "-Inf" | "NaN") {
        return true;
    }
    value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'))
        && value.parse::<f64>().is_ok_and(f64::is_finite)
}

/// HELP text on one line, without control characters, at most [`MAX_HELP_BYTES`].
fn clean_help(doc: &str) -> String {
    let mut help = String::with_capacity(doc.len().min(MAX_HELP_BYTES));
    for c in doc.trim().chars().filter(|c| !c.is_control()) {
        if help.len() + c.len_utf8() > MAX_HELP_BYTES {
            break;
        }
        help.push(c);
    }
    help
}

/// `a="x",b="y"` (the text between the braces); `None` when it is not that, or a label
/// is named twice or has a name a piped may not use.
fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let name = name.trim();
        if !valid_label_name(name) || labels.iter().any(|(n, _)| n == name) {
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

    /// The pipeds' `process_*` samples join Wisp's own in one family: one HELP and TYPE,
    /// which a Prometheus parser accepts.
    #[test]
    fn own_process_families_merge_with_the_pipeds() {
        let own = crate::process::ProcessStats {
            cpu_seconds: Some(1.5),
            open_fds: Some(12),
            ..Default::default()
        }
        .samples();
        let text = "\
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 7.25
process_cpu_seconds_total_bucket{le=\"1\"} 1
# TYPE go_goroutines gauge
go_goroutines 42
";
        let (out, skipped) = render_with(&own, &[piped("p1", text)]);
        assert_eq!(
            out.matches("# TYPE process_cpu_seconds_total").count(),
            1,
            "{out}"
        );
        assert!(out.contains("process_cpu_seconds_total 1.5\n"), "{out}");
        assert!(
            out.contains(
                "process_cpu_seconds_total{project_id=\"quickstart\",piped_id=\"p1\"} 7.25\n"
            ),
            "{out}"
        );
        assert!(out.contains("process_open_fds 12\n"), "{out}");
        assert!(!out.contains("_bucket"), "{out}");
        assert_eq!(skipped.samples, 1);
        let scrape =
            prometheus_parse::Scrape::parse(out.lines().map(|l| Ok(l.to_string()))).unwrap();
        assert_eq!(
            scrape
                .samples
                .iter()
                .filter(|s| s.metric == "process_cpu_seconds_total")
                .count(),
            2
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

    fn in_project(project: &str, id: &str, text: &str) -> PipedMetrics {
        PipedMetrics {
            project_id: project.into(),
            ..piped(id, text)
        }
    }

    /// Lines that would make Prometheus refuse the whole scrape are dropped; what is left
    /// parses.
    #[test]
    fn lines_prometheus_refuses_are_dropped() {
        let text = "\
too_big 1e999
minus_too_big -1e999
spelled_inf inf
spelled_infinity +Infinity
spelled_nan nan
hex 0x10
named{__name__=\"other\"} 1
__reserved 1
reserved_label{__meta=\"x\"} 1
twice{a=\"1\",a=\"2\"} 1
colon_label{a:b=\"1\"} 1
# TYPE __reserved_family counter
# TYPE weird_type info
# HELP __reserved_help x
ok_inf +Inf
ok_minus_inf -Inf
ok_nan NaN
ok_small 1.5e-300
ok_int{b=\"2\",a=\"1\"} 42 1700000000000
";
        let (out, skipped) = render(&[piped("p1", text)]);
        assert_eq!(skipped.lines, 14, "{out}");
        assert_eq!(
            out,
            "\
ok_inf{project_id=\"quickstart\",piped_id=\"p1\"} +Inf
ok_minus_inf{project_id=\"quickstart\",piped_id=\"p1\"} -Inf
ok_nan{project_id=\"quickstart\",piped_id=\"p1\"} NaN
ok_small{project_id=\"quickstart\",piped_id=\"p1\"} 1.5e-300
ok_int{project_id=\"quickstart\",piped_id=\"p1\",a=\"1\",b=\"2\"} 42
"
        );
    }

    /// A repeated series (the same labels in another order too) is written once.
    #[test]
    fn a_series_is_written_once() {
        let text = "rep{a=\"1\",b=\"2\"} 1\nrep{b=\"2\",a=\"1\"} 2\nrep{a=\"1\",b=\"2\"} 3\n";
        let (out, skipped) = render(&[piped("p1", text)]);
        assert_eq!(out.lines().count(), 1, "{out}");
        assert_eq!(skipped.samples, 2);
    }

    /// One project's piped cannot describe another project's samples: HELP and TYPE are
    /// written only when every project with samples in the family agrees.
    #[test]
    fn help_and_type_are_per_project() {
        let counter = "# HELP shared_total Mine.\n# TYPE shared_total counter\nshared_total 1\n";
        let gauge = "# HELP shared_total Yours.\n# TYPE shared_total gauge\nshared_total 2\n";
        let bare = "shared_total 3\n";

        // Two projects that disagree: neither line, the family named.
        let (out, skipped) =
            render(&[in_project("b", "p2", gauge), in_project("a", "p1", counter)]);
        assert!(!out.contains("# HELP"), "{out}");
        assert!(!out.contains("# TYPE"), "{out}");
        assert_eq!(skipped.undescribed, vec!["shared_total".to_string()]);
        assert_eq!(out.lines().count(), 2, "{out}");

        // A project that declares nothing is not described by another's declaration.
        let (out, skipped) = render(&[in_project("a", "p1", counter), in_project("b", "p2", bare)]);
        assert!(!out.contains("# TYPE"), "{out}");
        assert_eq!(skipped.undescribed, vec!["shared_total".to_string()]);

        // Projects that agree keep their lines; within a project the first piped's wins.
        let (out, skipped) = render(&[
            in_project("a", "p1", counter),
            in_project("a", "p3", gauge),
            in_project("b", "p2", counter),
        ]);
        assert_eq!(skipped.undescribed, Vec::<String>::new());
        assert_eq!(
            out.matches("# TYPE shared_total counter\n").count(),
            1,
            "{out}"
        );
        assert_eq!(
            out.matches("# HELP shared_total Mine.\n").count(),
            1,
            "{out}"
        );
        assert!(!out.contains("gauge"), "{out}");
    }

    /// One project's pipeds cannot push the others out: series and bytes are bounded per
    /// project and in all, whatever order the pipeds come in.
    #[test]
    fn series_are_bounded_per_project_and_in_all() {
        let many: String = (0..MAX_SERIES_PER_PROJECT + 500)
            .map(|i| format!("m{i} 1\n"))
            .collect();
        assert!(many.len() <= MAX_BYTES_PER_PIPED);
        let (out, skipped) = render(&[
            in_project("z", "p9", "small 1\n"),
            in_project("a", "p1", &many),
        ]);
        assert_eq!(out.lines().count(), MAX_SERIES_PER_PROJECT + 1);
        assert_eq!(skipped.samples, 500);
        assert!(out.contains("small{project_id=\"z\",piped_id=\"p9\"} 1\n"));

        // Many projects: the total bound holds.
        let pipeds: Vec<PipedMetrics> = (0..8)
            .map(|p| in_project(&format!("project-{p}"), "p", &many))
            .collect();
        let (out, _) = render(&pipeds);
        assert_eq!(out.lines().count(), MAX_SERIES);
        assert!(out.len() <= MAX_OUTPUT_BYTES);
    }
}
