//! The bench's result table: figure, measured value, target, value/target, PASS or MISS.

/// A target a figure must not exceed, with its unit.
pub enum Target {
    AtMost(f64, &'static str),
}

pub struct Row {
    figure: String,
    target: Target,
    value: Result<f64, String>,
    detail: String,
}

impl Row {
    pub fn new(figure: String, target: Target, value: Result<f64, String>) -> Row {
        Row {
            figure,
            target,
            value,
            detail: String::new(),
        }
    }

    /// Extra context shown next to the value (e.g. the two timings behind a ratio).
    pub fn with_detail(mut self, detail: String) -> Row {
        self.detail = detail;
        self
    }

    fn passes(&self) -> bool {
        let Target::AtMost(limit, _) = self.target;
        self.value.as_ref().is_ok_and(|v| *v <= limit)
    }
}

/// Prints the table (errors below it) and returns whether every row passed.
pub fn print(rows: &[Row]) -> bool {
    let header = ["figure", "value", "target", "ratio", "result"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|row| {
            let Target::AtMost(limit, unit) = row.target;
            let unit_sep = if unit == "x" { "" } else { " " };
            let (value, ratio) = match &row.value {
                Ok(v) => {
                    let mut value = format!("{v:.2}{unit_sep}{unit}");
                    if !row.detail.is_empty() {
                        value.push_str(&format!(" ({})", row.detail));
                    }
                    (value, format!("{:.2}", v / limit))
                }
                Err(_) => ("error (see below)".to_string(), "-".to_string()),
            };
            let verdict = if row.passes() { "PASS" } else { "MISS" };
            [
                row.figure.clone(),
                value,
                format!("<= {limit}{unit_sep}{unit}"),
                ratio,
                verdict.to_string(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cols: [&str; 5]| {
        let padded: Vec<String> = cols
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    println!();
    line(header);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    println!("|-{}-|", rule.join("-|-"));
    for c in &cells {
        line([&c[0], &c[1], &c[2], &c[3], &c[4]]);
    }
    for row in rows {
        if let Err(e) = &row.value {
            println!("\n{}: {e}", row.figure);
        }
    }
    rows.iter().all(Row::passes)
}
