//! The benchmark report: CSV parsing with located errors, grouping, ratios to the best
//! reference algorithm, the α-β lower bounds, and `circulant bench --compare` end to end.

use std::path::{Path, PathBuf};
use std::process::Command;

use circulant::plan::distribution::Distribution;
use circulant::plan::{CostModel, Problem};
use circulant_cli::report::compare::{AlphaBetaSource, Series, Statistic};
use circulant_cli::report::csv::{parse, AlphaBeta};
use circulant_cli::report::{
    plot, render_csv, render_markdown, render_table, row_bound, row_problem, Comparison,
};

const HEADER: &str = "library,op,algorithm,distribution,p,bytes,total_bytes,reps,min_s,median_s";

/// Relative comparison for computed floating-point values.
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-12 * want.abs().max(1e-30)
}

fn assert_close(got: f64, want: f64) {
    assert!(close(got, want), "got {got:e}, want {want:e}");
}

fn model(alpha_s: f64, beta_s_per_byte: f64) -> AlphaBeta {
    AlphaBeta::new(alpha_s, beta_s_per_byte).expect("valid model")
}

fn parse_err(text: &str) -> String {
    match parse(Path::new("runs/a.csv"), text) {
        Ok(m) => panic!("accepted malformed input: {:?}", m.records),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

#[test]
fn parses_rows_comments_and_alpha_beta() {
    let text = format!(
        "# run on host x\n# alpha_s=2e-6 beta_s_per_byte=1.5e-10\n{HEADER}\n\n\
         mpich,bcast,native,-,4,1000,1000,5,0.000010,0.000012\n"
    );
    let m = parse(Path::new("a.csv"), &text).expect("valid file");
    assert_eq!(m.records.len(), 1);
    let r = &m.records[0];
    assert_eq!((r.library.as_str(), r.op.as_str()), ("mpich", "bcast"));
    assert_eq!((r.p, r.bytes, r.total_bytes, r.reps), (4, 1000, 1000, 5));
    assert_eq!((r.min_s, r.median_s), (0.000010, 0.000012));
    assert_eq!(r.origin.line, 5);
    let (ab, at) = m.alpha_beta.expect("α-β comment");
    assert_eq!(ab, model(2e-6, 1.5e-10));
    assert_eq!(at.line, 2);
}

#[test]
fn written_lines_parse_back() {
    let text = format!(
        "{}\n{}\n",
        model(1.25e-6, 3e-10).comment(),
        circulant_cli::report::csv::header()
    );
    let row = parse(
        Path::new("a.csv"),
        &format!("{text}circulant,bcast,circulant,-,5,7,7,3,0.000001234,0.000002\n"),
    )
    .expect("valid");
    let line = row.records[0].csv_line();
    assert_eq!(
        line,
        "circulant,bcast,circulant,-,5,7,7,3,0.000001234,0.000002000"
    );
    let again = parse(Path::new("b.csv"), &format!("{text}{line}\n")).expect("valid");
    assert_eq!(again.records[0].min_s, 1.234e-6);
    assert_eq!(again.alpha_beta.expect("model").0, model(1.25e-6, 3e-10));
}

#[test]
fn columns_in_another_order_and_extra_columns_are_accepted() {
    let text = "median_s,min_s,reps,total_bytes,bytes,p,distribution,algorithm,op,library,host\n\
                0.2,0.1,3,8,8,2,-,ring,allgather,circulant,n1\n";
    let m = parse(Path::new("a.csv"), text).expect("valid file");
    let r = &m.records[0];
    assert_eq!(
        (r.algorithm.as_str(), r.min_s, r.median_s),
        ("ring", 0.1, 0.2)
    );
}

#[test]
fn missing_column_names_file_line_and_column() {
    let err =
        parse_err("# comment\nlibrary,op,algorithm,distribution,p,bytes,total_bytes,reps,min_s\n");
    assert!(err.contains("runs/a.csv:2"), "{err}");
    assert!(err.contains("`median_s`"), "{err}");
}

#[test]
fn bad_number_names_file_line_column_and_value() {
    let err = parse_err(&format!(
        "{HEADER}\nmpich,bcast,native,-,4,1,1,5,0.1,0.2\n# between\nmpich,bcast,native,-,4,2,2,5,fast,0.2\n"
    ));
    assert!(err.contains("runs/a.csv:4"), "{err}");
    assert!(err.contains("`min_s`") && err.contains("`fast`"), "{err}");

    let err = parse_err(&format!(
        "{HEADER}\nmpich,bcast,native,-,four,1,1,5,0.1,0.2\n"
    ));
    assert!(err.contains("runs/a.csv:2") && err.contains("`p`"), "{err}");

    let err = parse_err(&format!(
        "{HEADER}\nmpich,bcast,native,-,4,1,1,5,-0.1,0.2\n"
    ));
    assert!(
        err.contains("runs/a.csv:2") && err.contains("`min_s`"),
        "{err}"
    );

    let err = parse_err(&format!("{HEADER}\nmpich,bcast,native,-,4,1,1,5,0.1,NaN\n"));
    assert!(
        err.contains("runs/a.csv:2") && err.contains("`median_s`"),
        "{err}"
    );

    let err = parse_err(&format!("{HEADER}\nmpich,bcast,native,-,0,1,1,5,0.1,0.2\n"));
    assert!(
        err.contains("runs/a.csv:2") && err.contains("at least 1"),
        "{err}"
    );
}

#[test]
fn wrong_field_count_names_file_and_line() {
    let err = parse_err(&format!(
        "{HEADER}\nmpich,bcast,native,-,4,1,1,5,0.1,0.2\nmpich,bcast,native,-,4,2,2,5,0.1\n"
    ));
    assert!(err.contains("runs/a.csv:3"), "{err}");
    assert!(
        err.contains("9 fields") && err.contains("10 columns"),
        "{err}"
    );
}

#[test]
fn empty_text_field_and_missing_header_are_errors() {
    let err = parse_err(&format!("{HEADER}\n,bcast,native,-,4,1,1,5,0.1,0.2\n"));
    assert!(
        err.contains("runs/a.csv:2") && err.contains("`library`"),
        "{err}"
    );
    let err = parse_err("# only a comment\n\n");
    assert!(
        err.contains("runs/a.csv") && err.contains("no header"),
        "{err}"
    );
}

#[test]
fn malformed_alpha_beta_comment_is_an_error() {
    for comment in [
        "# alpha_s=1e-6",
        "# alpha_s=1e-6 beta_s_per_byte=x",
        "# alpha_s=1e-6 beta_s_per_byte=1e-9 gamma=2",
        "# alpha_s=-1 beta_s_per_byte=1e-9",
    ] {
        let err = parse_err(&format!("{HEADER}\n{comment}\n"));
        assert!(
            err.contains("runs/a.csv:2") && err.contains("α-β"),
            "{comment}: {err}"
        );
    }
    let err = parse_err(&format!(
        "# alpha_s=1e-6 beta_s_per_byte=1e-9\n{HEADER}\n# alpha_s=2e-6 beta_s_per_byte=1e-9\n"
    ));
    assert!(
        err.contains("runs/a.csv:3") && err.contains("line 1"),
        "{err}"
    );
}

#[test]
fn unreadable_file_is_named() {
    let missing = Path::new("/nonexistent/circulant/bench.csv");
    let err = circulant_cli::report::read_file(missing).expect_err("missing file");
    assert!(
        err.to_string().contains("/nonexistent/circulant/bench.csv"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Grouping, best series and ratios

/// Two circulant algorithms and one MPI library; which circulant algorithm is best differs
/// between the statistics at 1000 bytes.
const CIRCULANT_RUN: &str = "# alpha_s=1e-6 beta_s_per_byte=1e-9
library,op,algorithm,distribution,p,bytes,total_bytes,reps,min_s,median_s
circulant,bcast,circulant,-,4,1000,1000,5,0.000010,0.000012
circulant,bcast,binomial,-,4,1000,1000,5,0.000008,0.000013
circulant,bcast,circulant,-,4,1000000,1000000,5,0.001,0.0011
circulant,bcast,binomial,-,4,1000000,1000000,5,0.002,0.0021
circulant,allgatherv,circulant,spike,4,1000,998,5,0.00001,0.00001
";
const MPI_RUN: &str = "library,op,algorithm,distribution,p,bytes,total_bytes,reps,min_s,median_s
mpich,bcast,native,-,4,1000,1000,5,0.000016,0.000026
mpich,bcast,native,-,4,1000000,1000000,5,0.0015,0.0022
mpich,bcast,native,-,4,2000000,2000000,5,0.003,0.004
";

fn sample() -> Comparison {
    let a = parse(Path::new("circulant.csv"), CIRCULANT_RUN).expect("circulant run");
    let b = parse(Path::new("mpich.csv"), MPI_RUN).expect("mpich run");
    Comparison::build(&[a, b], "circulant", None).expect("comparison")
}

#[test]
fn groups_series_and_sizes() {
    let cmp = sample();
    let keys: Vec<(&str, &str, u64)> = cmp
        .groups
        .iter()
        .map(|g| (g.op.as_str(), g.distribution.as_str(), g.p))
        .collect();
    assert_eq!(keys, [("allgatherv", "spike", 4), ("bcast", "-", 4)]);
    let bcast = &cmp.groups[1];
    let series = |l: &str, a: &str| Series {
        library: l.into(),
        algorithm: a.into(),
    };
    assert_eq!(
        bcast.series,
        [
            series("circulant", "binomial"),
            series("circulant", "circulant"),
            series("mpich", "native")
        ]
    );
    let sizes: Vec<u64> = bcast.sizes.iter().map(|s| s.bytes).collect();
    assert_eq!(sizes, [1000, 1_000_000, 2_000_000]);
    // Only mpich measured 2 MB: no best, no ratio there.
    let last = &bcast.sizes[2];
    assert_eq!(last.times[0], None);
    assert!(last.best_min.is_none() && last.ratio(2, Statistic::Min).is_none());
}

#[test]
fn best_reference_algorithm_and_ratios_per_statistic() {
    let cmp = sample();
    let bcast = &cmp.groups[1];

    // 1000 B: binomial has the smaller minimum (8 µs), circulant the smaller median (12 µs).
    let row = &bcast.sizes[0];
    let best_min = row.best_min.as_ref().expect("best min");
    assert_eq!(
        (best_min.algorithm.as_str(), best_min.series),
        ("binomial", 0)
    );
    assert_close(best_min.time_s, 8e-6);
    let best_median = row.best_median.as_ref().expect("best median");
    assert_eq!(best_median.algorithm, "circulant");
    assert_close(best_median.time_s, 12e-6);
    assert_close(row.ratio(2, Statistic::Min).expect("ratio"), 16.0 / 8.0);
    assert_close(row.ratio(2, Statistic::Median).expect("ratio"), 26.0 / 12.0);
    assert_close(row.ratio(1, Statistic::Min).expect("ratio"), 10.0 / 8.0);

    // 1 MB: circulant best in both; mpich 1.5 ms / 1 ms and 2.2 ms / 1.1 ms.
    let row = &bcast.sizes[1];
    assert_eq!(
        row.best_min.as_ref().map(|b| b.algorithm.as_str()),
        Some("circulant")
    );
    assert_close(row.ratio(2, Statistic::Min).expect("ratio"), 1.5);
    assert_close(row.ratio(2, Statistic::Median).expect("ratio"), 2.0);
    assert_close(row.ratio(0, Statistic::Min).expect("ratio"), 2.0);
}

#[test]
fn bounds_and_best_over_bound_from_the_file_model() {
    let cmp = sample();
    assert_eq!(cmp.alpha_beta, Some(model(1e-6, 1e-9)));
    assert_eq!(
        cmp.alpha_beta_source,
        Some(AlphaBetaSource::File("circulant.csv:1".into()))
    );
    let bcast = &cmp.groups[1];
    // p = 4, q − 1 = 1, m = 1000: n* = √(βm/α) = 1, T = α + 2√(αβm) + βm = 1 + 2 + 1 µs.
    assert_close(bcast.sizes[0].bound_s.expect("bound"), 4e-6);
    assert_close(bcast.sizes[0].best_min_over_bound.expect("ratio"), 2.0);
    // m = 1e6: T = 1 µs + 2√(1e-9) s + 1 ms.
    let want = 1e-6 + 2.0 * 3.162_277_660_168_379_5e-5 + 1e-3;
    assert_close(bcast.sizes[1].bound_s.expect("bound"), want);
    assert_close(
        bcast.sizes[1].best_median_over_bound.expect("ratio"),
        1.1e-3 / want,
    );
    // allgatherv spike, c = 1000 at p = 4: counts 500,166,166,166 → 2α + β(998 − 166).
    let agv = &cmp.groups[0].sizes[0];
    assert_close(agv.bound_s.expect("bound"), 2e-6 + 832e-9);
}

#[test]
fn command_line_model_overrides_the_files() {
    let a = parse(Path::new("circulant.csv"), CIRCULANT_RUN).expect("run");
    let cmp = Comparison::build(&[a], "circulant", Some(model(0.0, 1e-9))).expect("comparison");
    assert_eq!(cmp.alpha_beta_source, Some(AlphaBetaSource::CommandLine));
    // α = 0: the bound of a 1000-byte broadcast is βm.
    assert_close(cmp.groups[1].sizes[0].bound_s.expect("bound"), 1e-6);
}

#[test]
fn no_model_no_bounds_and_other_reference() {
    let b = parse(Path::new("mpich.csv"), MPI_RUN).expect("run");
    let cmp = Comparison::build(&[b], "circulant", None).expect("comparison");
    assert!(cmp.alpha_beta.is_none());
    let row = &cmp.groups[0].sizes[0];
    assert!(row.bound_s.is_none() && row.best_min.is_none());
    let table = render_table(&cmp, Statistic::Min);
    assert!(table.contains("no circulant series"), "{table}");

    let b = parse(Path::new("mpich.csv"), MPI_RUN).expect("run");
    let cmp = Comparison::build(&[b], "mpich", None).expect("comparison");
    assert_close(
        cmp.groups[0].sizes[0]
            .ratio(0, Statistic::Min)
            .expect("ratio"),
        1.0,
    );
}

#[test]
fn conflicting_models_are_noted() {
    let a = parse(Path::new("a.csv"), CIRCULANT_RUN).expect("run");
    let other = CIRCULANT_RUN.replace("alpha_s=1e-6", "alpha_s=3e-6");
    let b = parse(Path::new("b.csv"), &other.replace("circulant,", "ucc,")).expect("run");
    let cmp = Comparison::build(&[a, b], "circulant", None).expect("comparison");
    assert_eq!(cmp.alpha_beta, Some(model(1e-6, 1e-9)));
    assert_eq!(cmp.notes.len(), 1);
    assert!(cmp.notes[0].contains("b.csv:1"), "{}", cmp.notes[0]);
}

#[test]
fn duplicate_rows_and_different_totals_are_errors() {
    let a = parse(Path::new("a.csv"), MPI_RUN).expect("run");
    let b = parse(Path::new("b.csv"), MPI_RUN).expect("run");
    let err = Comparison::build(&[a, b], "circulant", None).expect_err("duplicate");
    let text = err.to_string();
    assert!(
        text.contains("b.csv:2") && text.contains("a.csv:2"),
        "{text}"
    );
    assert!(text.contains("mpich/native measured twice"), "{text}");

    let a = parse(Path::new("a.csv"), MPI_RUN).expect("run");
    let changed = MPI_RUN.replace(
        "mpich,bcast,native,-,4,1000,1000",
        "ompi,bcast,native,-,4,1000,999",
    );
    let b = parse(Path::new("b.csv"), &changed).expect("run");
    let err = Comparison::build(&[a, b], "circulant", None).expect_err("total mismatch");
    let text = err.to_string();
    assert!(text.contains("b.csv:2") && text.contains("999"), "{text}");

    let empty = parse(Path::new("e.csv"), HEADER).expect("header only");
    assert!(Comparison::build(&[empty], "circulant", None).is_err());
}

#[test]
fn table_and_csv_forms() {
    let cmp = sample();
    let table = render_table(&cmp, Statistic::Min);
    assert!(table.contains("bcast, distribution -, p = 4"), "{table}");
    assert!(
        table.contains("best circulant") && table.contains("mpich/native / best"),
        "{table}"
    );
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with("1000000 "))
        .expect("1 MB row");
    let cells: Vec<&str> = line
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    // bytes, total, three times, best, one ratio, bound, best/bound.
    assert_eq!(
        cells[2..7],
        ["2.00 ms", "1.00 ms", "1.50 ms", "circulant", "1.50"],
        "{line}"
    );

    let csv = render_csv(&cmp);
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .expect("header")
        .starts_with("op,distribution,p,bytes"));
    let mpich_1mb = csv
        .lines()
        .find(|l| l.starts_with("bcast,-,4,1000000,1000000,mpich,native"))
        .expect("mpich 1 MB line");
    let fields: Vec<&str> = mpich_1mb.split(',').collect();
    assert_eq!(fields[8..11], ["0.001500000", "0.002200000", "1.5000"]);
    assert_eq!(fields[12], "circulant");
    // 4 bcast series rows with data at 1 kB and 1 MB (3 + 3), 1 at 2 MB, 1 allgatherv.
    assert_eq!(csv.lines().count(), 1 + 3 + 3 + 1 + 1);
}

#[test]
fn markdown_summary() {
    let cmp = sample();
    let md = render_markdown(&cmp, Statistic::Min);
    assert!(
        md.contains("**bcast, p = 4** (minimum over the repetitions"),
        "{md}"
    );
    assert!(md.contains("**allgatherv spike, p = 4**"), "{md}");
    assert!(
        md.contains("| bytes | circulant best | mpich/native | mpich/native / circulant |"),
        "{md}"
    );
    // 1 MB: circulant best 1.00 ms (circulant), mpich 1.50 ms, ratio 1.50; no bound (no model).
    assert!(
        md.contains("| 1000000 | 1.00 ms (circulant) | 1.50 ms | 1.50 |"),
        "{md}"
    );
    // 2 MB: only mpich measured: no best, no ratio.
    assert!(md.contains("| 2000000 | – | "), "{md}");
    // Every table row has as many cells as its header.
    for table in md.split("\n\n").filter(|t| t.starts_with('|')) {
        let widths: Vec<usize> = table.lines().map(|l| l.matches('|').count()).collect();
        assert!(widths.iter().all(|&w| w == widths[0]), "{table}");
    }
}

// ---------------------------------------------------------------------------------------------
// Bounds

/// The broadcast bound of plan::bounds (seed 000 Theorem 2) for the α and β of `ab`.
fn bcast_bound(p: usize, m: usize, ab: AlphaBeta) -> f64 {
    circulant::plan::bounds::broadcast(
        p,
        m,
        &CostModel {
            alpha: ab.alpha_s,
            beta: ab.beta_s_per_byte,
            o: 0.0,
        },
    )
}

#[test]
fn broadcast_bound_hand_computed() {
    let ab = model(1e-6, 1e-9);
    assert_eq!(bcast_bound(1, 1_000_000, ab), 0.0);
    // p = 2: one round, α + βm.
    assert_close(bcast_bound(2, 1000, ab), 2e-6);
    // p = 20, q = 5, α = 2.5 µs, m = 1 MB: (q−1)αβm = 1e-8, T = 10 µs + 200 µs + 1 ms.
    assert_close(bcast_bound(20, 1_000_000, model(2.5e-6, 1e-9)), 1.21e-3);
    // p = 8, q = 3, α = 5 µs: (q−1)αβm = 1e-8 again: T = 10 µs + 200 µs + 1 ms.
    assert_close(bcast_bound(8, 1_000_000, model(5e-6, 1e-9)), 1.21e-3);
    // p = 1024, q = 10: 9 µs + 2·√(9e-9) s + 1 ms.
    assert_close(
        bcast_bound(1024, 1_000_000, ab),
        9e-6 + 2.0 * 9.486_832_980_505_138e-5 + 1e-3,
    );
    // Small m: n* = √(2·1e-9·100/1e-6) < 1, so one block: q(α + βm) = 3 · 1.1 µs.
    assert_close(bcast_bound(8, 100, ab), 3.3e-6);
    // m = 0: nothing to send, no bound.
    assert_eq!(bcast_bound(20, 0, ab), 0.0);
}

#[test]
fn bound_per_csv_row() {
    let ab = model(1e-6, 1e-9);
    let bound = |op: &str, dist: &str, p: u64, bytes: u64, total: u64| {
        row_bound(op, dist, p, bytes, total, ab)
    };
    assert_close(bound("bcast", "-", 2, 1000, 1000).expect("bcast"), 2e-6);
    assert_eq!(bound("bcast", "-", 1, 1000, 1000), Some(0.0));
    assert_close(bound("allgather", "-", 8, 1000, 8000).expect("ag"), 1e-5);
    assert_close(
        bound("allgather", "-", 20, 1000, 20000).expect("ag"),
        5e-6 + 19e-6,
    );
    // allreduce uses the exact vector size (total_bytes): 2βm(p−1)/p.
    assert_close(bound("allreduce", "-", 4, 4003, 4000).expect("ar"), 8e-6);
    assert_close(
        bound("allreduce", "-", 20, 2003, 2000).expect("ar"),
        5e-6 + 3.8e-6,
    );
    // geometric, p = 8, c = 30: counts 80,40,40,20,20,20,20,10 (M = 250, min 10).
    assert_close(
        bound("allgatherv", "geometric", 8, 30, 250).expect("agv"),
        3e-6 + 240e-9,
    );
    // broadcast distribution, p = 4: every rank but the root receives c.
    assert_close(
        bound("allgatherv", "broadcast", 4, 100, 100).expect("agv"),
        2e-6 + 100e-9,
    );
    assert!(bound("allgatherv", "unknown", 8, 30, 250).is_none());
    assert!(bound("scan", "-", 8, 30, 30).is_none());
    assert!(bound("bcast", "-", 0, 30, 30).is_none());
    assert_eq!(
        row_problem("allgatherv", "spike", 3, 40, 40),
        Some(Problem::Allgatherv {
            counts: vec![20, 10, 10]
        })
    );
}

#[test]
fn distributions_at_p_8() {
    // The plan's formulas (seed 001 §3, seed 000 §3.2) with c = 30.
    let cases: [(&str, [usize; 8]); 7] = [
        ("regular", [30; 8]),
        ("broadcast", [30, 0, 0, 0, 0, 0, 0, 0]),
        ("spike", [15, 2, 2, 2, 2, 2, 2, 2]),
        ("half-full", [60, 0, 60, 0, 60, 0, 60, 0]),
        ("decreasing", [60, 51, 42, 34, 25, 17, 8, 0]),
        ("geometric", [80, 40, 40, 20, 20, 20, 20, 10]),
        ("mod3", [0, 30, 60, 0, 30, 60, 0, 30]),
    ];
    for (name, want) in cases {
        let d: Distribution = name.parse().expect("known name");
        assert_eq!(d.counts(8, 30), want, "{name}");
    }
    assert_eq!(Distribution::Spike.counts(1, 30), vec![15]);
    assert_eq!(Distribution::Decreasing.counts(1, 30), vec![30]);
    assert_eq!(Distribution::Geometric.counts(1, 30), vec![30]);
    // ⌊log₂ 5⌋ = 2: groups 1, 2, 4 get 30·5/(g·2).
    assert_eq!(
        Distribution::Geometric.counts(5, 30),
        vec![75, 37, 37, 18, 18]
    );
    assert!("zipf".parse::<Distribution>().is_err());
}

// ---------------------------------------------------------------------------------------------
// Charts and the command line

#[test]
fn chart_names_stay_inside_the_output_directory() {
    let text = format!(
        "{HEADER}\nx,../../etc/x,native,a/b,3,1,1,1,0.1,0.1\nx,bcast,native,-,3,1,1,1,0.1,0.1\n"
    );
    let m = parse(Path::new("a.csv"), &text).expect("run");
    let cmp = Comparison::build(&[m], "circulant", None).expect("comparison");
    let stems: Vec<String> = cmp.groups.iter().map(plot::chart_stem).collect();
    assert_eq!(stems, ["_.._etc_x-a_b-p3", "bcast-p3"]);
}

/// A fresh directory under the target's temporary directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bench_report_{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

fn circulant_bench(args: &[&std::ffi::OsStr], font: Option<&str>) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_circulant"));
    command.arg("bench").args(args);
    match font {
        Some(f) => command.env(plot::FONT_VARIABLE, f),
        None => command.env_remove(plot::FONT_VARIABLE),
    };
    command.output().expect("run circulant bench")
}

#[test]
fn compare_end_to_end_writes_charts_tables_csv_and_json() {
    let dir = scratch("e2e");
    let a = dir.join("circulant.csv");
    let b = dir.join("mpich.csv");
    std::fs::write(&a, CIRCULANT_RUN).expect("write");
    std::fs::write(&b, MPI_RUN).expect("write");
    let out = dir.join("charts");
    let csv_out = dir.join("comparison.csv");
    let args = [
        "--compare".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        "--csv".as_ref(),
        csv_out.as_os_str(),
    ];
    let output = circulant_bench(&args, None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("α-β model: α = 1.00 µs, β = 1.00 ns/B"),
        "{stdout}"
    );
    assert!(stdout.contains("bcast, distribution -, p = 4"), "{stdout}");
    assert!(stdout.contains("best circulant"), "{stdout}");
    assert!(stdout.contains("4 charts written"), "{stdout}");

    for stem in ["bcast-p4", "allgatherv-spike-p4"] {
        let png = std::fs::read(out.join(format!("{stem}.png"))).expect("png written");
        assert!(png.len() > 1000, "{stem}.png has {} bytes", png.len());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{stem}.png magic");
        let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).expect("svg written");
        assert!(svg.contains("<svg"), "{stem}.svg");
        assert!(
            svg.contains("mpich/native") || stem != "bcast-p4",
            "legend in {stem}.svg"
        );
        assert!(
            svg.contains("α-β lower bound"),
            "bound legend in {stem}.svg"
        );
    }
    let csv = std::fs::read_to_string(&csv_out).expect("csv written");
    assert!(csv.starts_with("op,distribution,p,bytes,total_bytes,library,algorithm"));

    // --json prints one object with the same groups; --median and --alpha/--beta are taken.
    let json_args = [
        "--compare".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        "--json".as_ref(),
        "--median".as_ref(),
        "--alpha".as_ref(),
        "2e-6".as_ref(),
        "--beta".as_ref(),
        "0".as_ref(),
    ];
    let output = circulant_bench(&json_args, None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(value["reference"], "circulant");
    assert_eq!(value["alpha_beta"]["alpha_s"], 2e-6);
    assert_eq!(value["groups"][1]["op"], "bcast");
    assert_eq!(value["groups"][1]["sizes"][0]["ratio_min"][2], 2.0);
    // β = 0, p = 4: the broadcast bound is q·α = 4 µs.
    let bound = value["groups"][1]["sizes"][1]["bound_s"]
        .as_f64()
        .expect("bound");
    assert_close(bound, 4e-6);
}

#[test]
fn compare_reports_bad_input_missing_font_and_missing_files() {
    let dir = scratch("errors");
    let bad = dir.join("bad.csv");
    std::fs::write(
        &bad,
        format!("{HEADER}\nmpich,bcast,native,-,4,1,1,5,oops,0.2\n"),
    )
    .expect("write");
    let out = dir.join("charts");
    let output = circulant_bench(
        &[
            "--compare".as_ref(),
            bad.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
        None,
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.csv:2") && stderr.contains("`oops`"),
        "{stderr}"
    );

    let good = dir.join("good.csv");
    std::fs::write(&good, MPI_RUN).expect("write");
    let output = circulant_bench(
        &[
            "--compare".as_ref(),
            good.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
        Some("/nonexistent/font.ttf"),
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("fonts-dejavu-core") && stderr.contains("/nonexistent/font.ttf"),
        "{stderr}"
    );

    let output = circulant_bench(
        &[
            "--compare".as_ref(),
            good.as_os_str(),
            "--alpha".as_ref(),
            "1e-6".as_ref(),
        ],
        None,
    );
    assert!(!output.status.success(), "--alpha without --beta accepted");

    let output = circulant_bench(
        &[
            "--compare".as_ref(),
            good.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
            "--alpha".as_ref(),
            "-1e-6".as_ref(),
            "--beta".as_ref(),
            "0".as_ref(),
        ],
        None,
    );
    assert!(!output.status.success(), "negative α accepted");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("non-negative"), "{stderr}");

    // Without --compare it measures (tests/bench_run.rs); --compare needs files.
    let output = circulant_bench(&["--compare".as_ref()], None);
    assert!(!output.status.success(), "--compare without files accepted");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--compare"));
}

/// --json and --markdown write charts only when --out is given, so they need no font; the
/// tables write them to bench-report/ by default.
#[test]
fn compare_writes_charts_with_json_or_markdown_only_into_a_given_out() {
    let dir = scratch("charts_when");
    let file = dir.join("mpich.csv");
    std::fs::write(&file, MPI_RUN).expect("write");
    let run = |extra: &[&str], font: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_circulant"));
        command
            .current_dir(&dir)
            .args(["bench", "--compare"])
            .arg(&file)
            .args(extra);
        match font {
            Some(f) => command.env(plot::FONT_VARIABLE, f),
            None => command.env_remove(plot::FONT_VARIABLE),
        };
        command.output().expect("run circulant bench")
    };
    let default_out = dir.join("bench-report");
    for flag in ["--json", "--markdown"] {
        let output = run(&[flag], Some("/nonexistent/font.ttf"));
        assert!(
            output.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!output.stdout.is_empty(), "{flag} printed nothing");
        assert!(!default_out.exists(), "{flag} wrote charts");
    }

    let output = run(&["--markdown", "--out", "given"], None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(dir.join("given").join("bcast-p4.svg").exists());
    assert!(!default_out.exists());

    let output = run(&[], None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("charts written to bench-report"));
    assert!(default_out.join("bcast-p4.svg").exists());
}

#[test]
fn charts_of_degenerate_groups_are_drawn() {
    // p = 1 (bound 0), a zero-byte size and zero times: nothing positive to put on log axes
    // in one group, a single point in the other.
    let text = format!(
        "# alpha_s=1e-6 beta_s_per_byte=1e-9\n{HEADER}\n\
         circulant,bcast,circulant,-,1,0,0,3,0,0\n\
         circulant,allgather,ring,-,2,8,16,3,0.000002,0.000003\n"
    );
    let m = parse(Path::new("a.csv"), &text).expect("run");
    let cmp = Comparison::build(&[m], "circulant", None).expect("comparison");
    let dir = scratch("degenerate");
    let written = plot::write_charts(&cmp, Statistic::Median, &dir).expect("charts");
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "allgather-p2.png",
            "allgather-p2.svg",
            "bcast-p1.png",
            "bcast-p1.svg"
        ]
    );
    for path in &written {
        assert!(
            std::fs::metadata(path).expect("written").len() > 0,
            "{}",
            path.display()
        );
    }
}
