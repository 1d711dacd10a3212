//! Rules of the source layout that keep the executor readable: no file of the transport or of
//! the user API holds two concerns' worth of lines, and the eager protocol module never
//! reaches into an operation's state (it gets what it needs through its interface).

use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Past this a file usually holds two concerns.
const MOST_LINES: usize = 800;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn files_under(dir: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&Path::new(ROOT).join(dir), &mut files);
    assert!(!files.is_empty(), "no Rust files under {dir}");
    files
}

#[test]
fn no_file_of_the_transport_or_the_user_api_is_longer_than_800_lines() {
    let mut long = Vec::new();
    for dir in ["src/transport", "src/comm"] {
        for file in files_under(dir) {
            let lines = fs::read_to_string(&file)
                .expect("a source file")
                .lines()
                .count();
            if lines > MOST_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "longer than {MOST_LINES} lines: {long:?}");
}

#[test]
fn the_eager_module_does_not_reach_into_the_run() {
    let files = files_under("src/transport/eager");
    for file in &files {
        let text = fs::read_to_string(file).expect("a source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !(code.contains("run::") || code.contains("Run")),
                "{}:{}: the eager module names the run: {line}",
                file.display(),
                n + 1
            );
        }
    }
    assert!(files.iter().any(|f| f.ends_with("eager/mod.rs")));
}

#[test]
fn the_slot_header_has_one_encoder() {
    // The fixed header's bytes are made by `Fixed::new` alone: no other file builds one.
    let mut makers = Vec::new();
    for file in files_under("src") {
        let text = fs::read_to_string(&file).expect("a source file");
        if text.contains("Fixed {") {
            makers.push(file.display().to_string());
        }
    }
    assert_eq!(
        makers.len(),
        1,
        "files that build a slot header: {makers:?}"
    );
    assert!(makers[0].ends_with("eager/slot.rs"), "{makers:?}");
}
