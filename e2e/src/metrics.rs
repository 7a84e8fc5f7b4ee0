//! Reading Prometheus text exposition (`GET /metrics`).

/// One sample: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// Parses every sample line (comments and blank lines skipped; lines that do not parse too).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(parse_line)
        .collect()
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

/// The sum of the samples named `name` whose labels include every pair of `labels` (0 when
/// there is none: a counter never incremented may be absent).
pub fn sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    parse(text)
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        })
        .map(|s| s.value)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_series_that_match_the_given_labels() {
        let text = "# HELP x total\n# TYPE x counter\n\
                    x{result=\"remote\",reason=\"big\"} 3\n\
                    x{result=\"remote\",reason=\"huge\"} 2\n\
                    x{result=\"local\",reason=\"small\"} 7\n\
                    y 1.5\n";
        assert_eq!(sum(text, "x", &[("result", "remote")]), 5.0);
        assert_eq!(sum(text, "x", &[]), 12.0);
        assert_eq!(sum(text, "x", &[("result", "fallback")]), 0.0);
        assert_eq!(sum(text, "y", &[]), 1.5);
        assert_eq!(sum(text, "z", &[]), 0.0);
    }

    #[test]
    fn label_values_may_hold_escapes_and_braces() {
        let s = parse("m{a=\"x\\\"}y\",b=\"2\"} 4\n");
        assert_eq!(
            s,
            vec![Sample {
                name: "m".into(),
                labels: vec![("a".into(), "x\"}y".into()), ("b".into(), "2".into())],
                value: 4.0
            }]
        );
    }
}
