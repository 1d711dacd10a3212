//! Rules of the source layout that keep the executor readable: no file of the transport or of
//! the user API holds two concerns' worth of lines, their files import each other in no
//! cycle, requests hold tasks and never name an engine, and the eager protocol module never
//! reaches into an operation's state (it gets what it needs through its interface).

use std::collections::{BTreeMap, BTreeSet};
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

#[test]
fn the_files_of_the_user_api_and_of_the_transport_import_each_other_in_no_cycle() {
    for dir in ["comm", "transport"] {
        let graph = import_graph(dir);
        assert!(
            graph.len() > 10,
            "{dir}: the graph found {} files",
            graph.len()
        );
        // The graph sees real imports: the engines import the communicator.
        if dir == "comm" {
            assert!(
                graph["comm::plans"].contains("comm::communicator"),
                "{graph:?}"
            );
        }
        let cycles = cycles(&graph);
        assert!(
            cycles.is_empty(),
            "src/{dir}: files that import each other: {cycles:?}"
        );
    }
}

#[test]
fn requests_hold_tasks_and_name_no_engine() {
    for file in ["src/comm/request.rs", "src/comm/persistent.rs"] {
        let text = fs::read_to_string(Path::new(ROOT).join(file)).expect("a source file");
        for engine in [
            "Plans",
            "Segment",
            "NodePhases",
            "Operation",
            "Run",
            "PhasedCall",
        ] {
            let named = text
                .lines()
                .map(|line| line.split("//").next().unwrap_or(""))
                .any(|code| {
                    code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .any(|word| word == engine)
                });
            assert!(
                !named,
                "{file} names {engine}: a request holds a task of any engine"
            );
        }
    }
}

/// The files of module `dir` (a directory under src/) and the files each imports: a path
/// through `crate::`, `super::` or `self::` (in a `use` or written out) that names an item of
/// another file of the module, resolved through the re-exports of its `mod.rs` files to the
/// file that defines it. A `mod.rs` declaring its children and re-exporting their items
/// imports nothing by that; everything else counts. Tests are left out.
fn import_graph(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let base = Path::new(ROOT).join("src");
    let mut files = BTreeMap::new();
    for file in files_under(&format!("src/{dir}")) {
        let rel = file.strip_prefix(&base).expect("a file under src");
        let module = rel
            .with_extension("")
            .to_string_lossy()
            .replace("/mod", "")
            .replace('/', "::");
        let text = fs::read_to_string(&file).expect("a source file");
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .map(|line| line.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        files.insert(module, (file.ends_with("mod.rs"), code));
    }
    // The items each mod.rs re-exports, and the paths they come from.
    let mut reexports: BTreeMap<(String, String), String> = BTreeMap::new();
    for (module, (is_root, code)) in &files {
        if !is_root {
            continue;
        }
        for statement in statements(code) {
            let Some(rest) = reexport(&statement) else {
                continue;
            };
            for (path, name) in use_paths(rest) {
                reexports.insert((module.clone(), name), path);
            }
        }
    }
    let resolve = |from: &str, path: &str| -> Option<String> {
        let mut path = path.to_string();
        for _ in 0..8 {
            let segments: Vec<&str> = path.split("::").collect();
            let mut at = segments.first()?.to_string();
            files.get(&at)?;
            let mut followed = None;
            for segment in &segments[1..] {
                let next = format!("{at}::{segment}");
                if files.contains_key(&next) {
                    at = next;
                    continue;
                }
                if let Some(target) = reexports.get(&(at.clone(), segment.to_string())) {
                    followed = Some(
                        if target.starts_with("crate::")
                            || target.starts_with("super::")
                            || target.starts_with("self::")
                        {
                            absolute(&at, target)
                        } else {
                            format!("{at}::{target}")
                        },
                    );
                }
                break;
            }
            match followed {
                Some(next) if next != path => path = next,
                _ => return (at != from).then_some(at),
            }
        }
        None
    };
    let mut graph = BTreeMap::new();
    for (module, (is_root, code)) in &files {
        let mut imports = BTreeSet::new();
        for statement in statements(code) {
            if *is_root && reexport(&statement).is_some() {
                continue;
            }
            let paths: Vec<String> = match statement.strip_prefix("use ") {
                Some(rest) => use_paths(rest).into_iter().map(|(p, _)| p).collect(),
                None => written_paths(&statement),
            };
            for path in paths {
                let first = path.split("::").next().unwrap_or("");
                let child = format!("{module}::{first}");
                let path = if ["crate", "super", "self"].contains(&first) {
                    absolute(module, &path)
                } else if *is_root && files.contains_key(&child) {
                    format!("{module}::{path}")
                } else {
                    continue;
                };
                if let Some(file) = resolve(module, &path) {
                    imports.insert(file);
                }
            }
        }
        graph.insert(module.clone(), imports);
    }
    graph
}

/// `path` (from `crate::`, `super::` or `self::`) as a path from the crate root, seen from
/// the file of `module` (a file's `self` is its module, `super` the module above).
fn absolute(module: &str, path: &str) -> String {
    let mut base: Vec<&str> = module.split("::").collect();
    let mut segments = path.split("::").peekable();
    match segments.peek() {
        Some(&"crate") => {
            segments.next();
            base.clear();
        }
        Some(&"self") => {
            segments.next();
        }
        _ => {
            while segments.peek() == Some(&"super") {
                segments.next();
                base.pop();
            }
        }
    }
    base.extend(segments);
    base.join("::")
}

/// The statements of `code`, roughly: `use` declarations whole, and every other line.
fn statements(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in code.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && !(trimmed.starts_with("use ") || reexport(trimmed).is_some()) {
            out.push(trimmed.to_string());
            continue;
        }
        pending.push(' ');
        pending.push_str(trimmed);
        if trimmed.ends_with(';') {
            out.push(pending.trim().to_string());
            pending.clear();
        }
    }
    out
}

/// What a re-export (`pub use …;`, `pub(crate) use …;`) re-exports.
fn reexport(statement: &str) -> Option<&str> {
    let rest = statement.strip_prefix("pub")?;
    let rest = match rest.strip_prefix('(') {
        Some(inner) => &inner[inner.find(')')? + 1..],
        None => rest,
    };
    rest.trim_start().strip_prefix("use ")
}

/// The paths of a `use` tree (`a::{b, c::D as E};`) and the name each binds.
fn use_paths(tree: &str) -> Vec<(String, String)> {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<(String, String)>) {
        let tree = tree.trim().trim_end_matches(';').trim();
        if let Some(open) = tree.find('{') {
            let head = tree[..open].trim_end_matches("::");
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let prefix = if head.is_empty() {
                prefix.to_string()
            } else {
                format!("{prefix}{head}::")
            };
            let mut depth = 0;
            let mut part = String::new();
            for ch in inner.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&prefix, &part, out);
                        part.clear();
                        continue;
                    }
                    _ => {}
                }
                part.push(ch);
            }
            expand(&prefix, &part, out);
            return;
        }
        if tree.is_empty() {
            return;
        }
        let mut names = tree.split(" as ");
        let path = names.next().unwrap_or("").trim();
        let name = names
            .next()
            .map(str::trim)
            .unwrap_or_else(|| path.rsplit("::").next().unwrap_or(path));
        out.push((format!("{prefix}{path}"), name.to_string()));
    }
    let mut out = Vec::new();
    expand("", tree, &mut out);
    out
}

/// The paths from `crate::`, `super::` or `self::` written out in a line of code (not in
/// a visibility: `pub(in crate::transport)` imports nothing).
fn written_paths(line: &str) -> Vec<String> {
    let line = match line.find("pub(in ") {
        Some(at) => match line[at..].find(')') {
            Some(end) => format!("{}{}", &line[..at], &line[at + end + 1..]),
            None => line.to_string(),
        },
        None => line.to_string(),
    };
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in line.match_indices(start) {
            if line[..at].chars().next_back().is_some_and(word) {
                continue;
            }
            let end = line[at..]
                .find(|c: char| !(word(c) || c == ':'))
                .map_or(line.len(), |n| at + n);
            out.push(line[at..end].trim_end_matches(':').to_string());
        }
    }
    out
}

/// The cycles of `graph`: its strongly connected components of more than one file.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Files reachable from each file; two files on a cycle reach each other.
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(at) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|k| (k, reach(k))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for file in graph.keys() {
        if !reaches[file].contains(file) || out.iter().any(|c| c.contains(file)) {
            continue;
        }
        let component = graph
            .keys()
            .filter(|other| reaches[file].contains(*other) && reaches[*other].contains(file))
            .cloned()
            .collect();
        out.push(component);
    }
    out
}
