//! Reading a node's `GET /metrics` (Prometheus text exposition), strictly.
//!
//! A counter read as 0 because its series is absent proves nothing: the metric may have been
//! renamed, a label value misspelt, or the page may come from the wrong node, and a test that
//! checks "no fallback happened" would pass all the same. So [`Metrics::sum`] is an error
//! naming the metric and the labels when no series matches, and a line that does not parse is
//! an error too (never skipped). There is no lenient read: servers and workers export every
//! series of their closed label sets from the start, at 0, so "nothing counted yet" is a series
//! that reads 0, and a missing one is always a mistake.

use std::fmt;

/// One sample: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of label `key`; an error naming the series when it has none.
    pub fn required_label(&self, key: &str) -> Result<&str, MetricsError> {
        self.label(key).ok_or_else(|| MetricsError::NoLabel {
            metric: self.name.clone(),
            label: key.to_string(),
            labels: self.labels.clone(),
        })
    }

    fn has_labels(&self, labels: &[(&str, &str)]) -> bool {
        labels.iter().all(|(k, v)| self.label(k) == Some(*v))
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricsError {
    #[error("expected a sample line, found one that does not parse: line={line_no} text={text:?}")]
    Malformed { line_no: usize, text: String },
    #[error("no series of {metric} has the labels {}", Labels(labels))]
    Missing {
        metric: String,
        labels: Vec<(String, String)>,
    },
    #[error("a series of {metric} has no label {label}: labels={}", Labels(labels))]
    NoLabel {
        metric: String,
        label: String,
        labels: Vec<(String, String)>,
    },
}

/// `{a="x",b="y"}` (`{}` for none), for messages.
struct Labels<'a>(&'a [(String, String)]);

impl fmt::Display for Labels<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v:?}")?;
        }
        f.write_str("}")
    }
}

/// One `/metrics` page, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    samples: Vec<Sample>,
}

impl Metrics {
    /// Parses every sample line (comments and blank lines skipped); a line that does not parse
    /// is an error.
    pub fn parse(text: &str) -> Result<Metrics, MetricsError> {
        let mut samples = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let sample = parse_line(line).ok_or_else(|| MetricsError::Malformed {
                line_no: i + 1,
                text: line.to_string(),
            })?;
            samples.push(sample);
        }
        Ok(Metrics { samples })
    }

    /// Every sample, in page order.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// The series of `name` whose labels include every pair of `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples
            .iter()
            .filter(move |s| s.name == name && s.has_labels(labels))
    }

    /// The sum of the series of `name` whose labels include every pair of `labels`; an error
    /// when there is none.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> Result<f64, MetricsError> {
        let mut found = false;
        let mut sum = 0.0;
        for s in self.matching(name, labels) {
            found = true;
            sum += s.value;
        }
        if !found {
            return Err(MetricsError::Missing {
                metric: name.to_string(),
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            });
        }
        Ok(sum)
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let (series, rest) = match line.find('{') {
        Some(_) => {
            let close = line.rfind('}')?;
            (&line[..close + 1], &line[close + 1..])
        }
        None => line.split_once(' ')?,
    };
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    let (name, labels) = match series.find('{') {
        None => (series.to_string(), Vec::new()),
        Some(open) => (
            series[..open].to_string(),
            parse_labels(&series[open + 1..series.len() - 1])?,
        ),
    };
    if name.is_empty() {
        return None;
    }
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// `a="x",b="y\"z"`.
fn parse_labels(s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let mut key = String::new();
        for c in chars.by_ref() {
            if c == '=' {
                break;
            }
            key.push(c);
        }
        if chars.next()? != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((key.trim().to_string(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# HELP x total\n# TYPE x counter\n\
                        x{result=\"remote\",reason=\"big\"} 3\n\
                        x{result=\"remote\",reason=\"huge\"} 2\n\
                        x{result=\"local\",reason=\"small\"} 7\n\
                        y 1.5\n";

    #[test]
    fn sums_the_series_that_match_the_given_labels() {
        let m = Metrics::parse(PAGE).unwrap();
        assert_eq!(m.sum("x", &[("result", "remote")]), Ok(5.0));
        assert_eq!(m.sum("x", &[]), Ok(12.0));
        assert_eq!(m.sum("y", &[]), Ok(1.5));
    }

    #[test]
    fn a_missing_series_is_an_error_naming_the_metric_and_labels() {
        let m = Metrics::parse(PAGE).unwrap();
        let e = m.sum("x", &[("result", "fallback")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no series of x has the labels {result=\"fallback\"}"
        );
        assert!(m.sum("z", &[]).is_err());
        assert!(m.sum("x", &[("cause", "remote")]).is_err());
    }

    #[test]
    fn a_line_that_does_not_parse_is_an_error_not_skipped() {
        let e = Metrics::parse("# ok\nx{a=\"1\"} 2\nx{a=1} 3\n").unwrap_err();
        assert_eq!(
            e,
            MetricsError::Malformed {
                line_no: 3,
                text: "x{a=1} 3".into()
            }
        );
        assert!(Metrics::parse("x lots\n").is_err());
    }

    #[test]
    fn label_values_may_hold_escapes_and_braces() {
        let m = Metrics::parse("m{a=\"x\\\"}y\",b=\"2\"} 4\n").unwrap();
        assert_eq!(
            m.samples(),
            [Sample {
                name: "m".into(),
                labels: vec![("a".into(), "x\"}y".into()), ("b".into(), "2".into())],
                value: 4.0
            }]
        );
    }
}
