//! nccl-tests' table: the same columns, widths and header lines, so that tools and eyes used
//! to `all_reduce_perf` read ours unchanged.

/// Whitespace-separated fields in a row: size, count, type, redop, then time, algbw, busbw
/// and #wrong for out-of-place and again for in-place.
pub const FIELDS_PER_ROW: usize = 12;

// Field widths, separating spaces included (those of nccl-tests).
const SIZE_W: usize = 12;
const COUNT_W: usize = 14;
const TYPE_W: usize = 10;
const REDOP_W: usize = 8;
const TIME_W: usize = 9;
const BW_W: usize = 8;
const WRONG_W: usize = 8;
const GROUP_W: usize = TIME_W + 2 * BW_W + WRONG_W;
const LEAD_W: usize = SIZE_W + COUNT_W + TYPE_W + REDOP_W;

/// One form's measurement, the same on every rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Seconds per operation.
    pub secs: f64,
    /// Bytes / time, in GB/s.
    pub algbw: f64,
    /// algbw times the collective's bus factor, in GB/s.
    pub busbw: f64,
    /// Wrong elements over all ranks; `None` when not checked.
    pub wrong: Option<u64>,
}

impl Measured {
    /// The row of a collective over `bytes` that took `secs` per run, with its bus factor
    /// (what busbw multiplies algbw by) and the count of wrong elements, if checked.
    pub fn new(bytes: usize, secs: f64, bus_factor: f64, wrong: Option<u64>) -> Measured {
        let algbw = bytes as f64 / secs / 1e9;
        Measured {
            secs,
            algbw,
            busbw: algbw * bus_factor,
            wrong,
        }
    }
}

/// busbw / algbw for `nranks` (nccl-tests' `2(n-1)/n` for allreduce, 1 for broadcast).
pub fn allreduce_bus_factor(nranks: usize) -> f64 {
    2.0 * (nranks as f64 - 1.0) / nranks as f64
}

/// The three header lines: group labels, column names, units.
pub fn header() -> String {
    let groups = format!(
        "#{:lead$}{:^group$}{:^group$}",
        "",
        "out-of-place",
        "in-place",
        lead = LEAD_W - 1,
        group = GROUP_W
    );
    let group_names = format!(
        "{:>TIME_W$}{:>BW_W$}{:>BW_W$}{:>WRONG_W$}",
        "time", "algbw", "busbw", "#wrong"
    );
    let names = format!(
        "#{:>w$}{:>COUNT_W$}{:>TYPE_W$}{:>REDOP_W$}{group_names}{group_names}",
        "size",
        "count",
        "type",
        "redop",
        w = SIZE_W - 1
    );
    let group_units = format!(
        "{:>TIME_W$}{:>BW_W$}{:>BW_W$}{:>WRONG_W$}",
        "(us)", "(GB/s)", "(GB/s)", ""
    );
    let units = format!(
        "#{:>w$}{:>COUNT_W$}{:>TYPE_W$}{:>REDOP_W$}{group_units}{group_units}",
        "(B)",
        "(elements)",
        "",
        "",
        w = SIZE_W - 1
    );
    [groups, names, units]
        .map(|line| line.trim_end().to_string())
        .join("\n")
}

/// Microseconds as nccl-tests prints them: fewer decimals as the number grows, so that the
/// column keeps its width.
fn time_field(us: f64) -> String {
    if us < 1e4 {
        format!("{us:.2}")
    } else if us < 1e5 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

fn group(m: &Measured) -> String {
    let wrong = m.wrong.map_or_else(|| "N/A".to_string(), |w| w.to_string());
    format!(
        "{:>TIME_W$}{:>BW_W$.2}{:>BW_W$.2}{:>WRONG_W$}",
        time_field(m.secs * 1e6),
        m.algbw,
        m.busbw,
        wrong
    )
}

/// One row: a message of `bytes` (`count` elements) in both forms.
pub fn row(
    bytes: usize,
    count: usize,
    type_name: &str,
    redop: &str,
    out_of_place: &Measured,
    in_place: &Measured,
) -> String {
    format!(
        "{bytes:>SIZE_W$}{count:>COUNT_W$}{type_name:>TYPE_W$}{redop:>REDOP_W$}{}{}",
        group(out_of_place),
        group(in_place)
    )
}

/// The closing lines: wrong elements over the whole sweep and the average busbw of every
/// row and form.
pub fn footer(wrong: Option<u64>, busbw: &[f64]) -> String {
    let verdict = match wrong {
        None => "N/A (not checked)".to_string(),
        Some(0) => "0 OK".to_string(),
        Some(n) => format!("{n} FAILED"),
    };
    let average = if busbw.is_empty() {
        0.0
    } else {
        busbw.iter().sum::<f64>() / busbw.len() as f64
    };
    format!("# Wrong elements       : {verdict}\n# Avg bus bandwidth    : {average:.5}\n#")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lines_are_nccl_tests_ones() {
        let h = header();
        let lines: Vec<&str> = h.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[1],
            "#       size         count      type   redop     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong"
        );
        assert_eq!(
            lines[2],
            "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)"
        );
        // Each group label sits over its four columns.
        let out_at = lines[0].find("out-of-place").unwrap();
        let in_at = lines[0].find("in-place").unwrap();
        assert!((LEAD_W..LEAD_W + GROUP_W).contains(&out_at), "{}", lines[0]);
        assert!((LEAD_W + GROUP_W..LEAD_W + 2 * GROUP_W).contains(&in_at));
    }

    #[test]
    fn rows_line_up_under_the_header() {
        let m = Measured::new(4096, 12.5e-6, allreduce_bus_factor(4), Some(0));
        let r = row(4096, 1024, "float", "sum", &m, &m);
        assert_eq!(r.split_whitespace().count(), FIELDS_PER_ROW);
        let names = header().lines().nth(1).unwrap().to_string();
        assert_eq!(r.len(), names.len());
        // Right-aligned columns end where their names end.
        assert_eq!(
            r.find("1024").unwrap() + 4,
            names.find("count").unwrap() + 5
        );
        assert_eq!(
            r,
            "        4096          1024     float     sum    12.50    0.33    0.49       0    12.50    0.33    0.49       0"
        );
    }

    #[test]
    fn bandwidths_follow_nccl_tests_formulas() {
        let m = Measured::new(1_000_000_000, 2.0, allreduce_bus_factor(2), None);
        assert_eq!((m.algbw, m.busbw), (0.5, 0.5));
        let m = Measured::new(1_000_000_000, 1.0, allreduce_bus_factor(4), None);
        assert_eq!(m.busbw, 1.5);
        assert_eq!(allreduce_bus_factor(1), 0.0);
    }

    #[test]
    fn unchecked_rows_say_not_applicable_and_times_keep_their_width() {
        let slow = Measured::new(1 << 30, 1.5, 1.0, None);
        let r = row(1 << 30, 1 << 28, "bfloat16", "prod", &slow, &slow);
        assert_eq!(r.split_whitespace().count(), FIELDS_PER_ROW);
        assert!(r.contains(" 1500000 ") && r.ends_with("N/A"), "{r}");
        assert_eq!(time_field(12345.67), "12345.7");
    }

    #[test]
    fn footer_reports_the_verdict_and_the_average() {
        let f = footer(Some(0), &[1.0, 2.0]);
        assert!(f.contains("Wrong elements       : 0 OK"));
        assert!(f.contains("# Avg bus bandwidth    : 1.50000"));
        assert!(footer(Some(3), &[]).contains("3 FAILED"));
        assert!(footer(None, &[]).contains("N/A"));
    }
}
