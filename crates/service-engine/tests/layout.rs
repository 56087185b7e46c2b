//! The shape rules of the code base, checked on its sources so a change that breaks
//! one fails here instead of in a review: files small enough to read, no import circle
//! among the engine's files, an HTTP adapter that goes through the engine's verbs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Longest a source file may grow.
const MAX_LINES: usize = 800;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("a readable source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn no_library_source_file_is_longer_than_800_lines() {
    let crates = workspace().join("crates");
    let mut too_long = Vec::new();
    for entry in fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        for file in rust_files(&src) {
            let lines = fs::read_to_string(&file).unwrap().lines().count();
            if lines > MAX_LINES {
                too_long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(too_long.is_empty(), "split these: {too_long:?}");
}

/// The engine module a `crate::` path names (`crate::bus::Topic` → `bus`); items the
/// crate root re-exports name the module that defines them.
fn module_of(path: &str, reexports: &BTreeMap<String, String>) -> Option<String> {
    let first = path.trim_start_matches("crate::").split("::").next()?;
    let first = first.trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace());
    if first.chars().next()?.is_uppercase() || reexports.contains_key(first) {
        return reexports.get(first).cloned();
    }
    Some(first.to_owned())
}

/// Each engine module and the engine modules its `use crate::...` lines import.
fn engine_imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = workspace().join("crates/service-engine/src");
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    // `pub use module::{A, B};` lines of lib.rs: what each re-exported name is.
    let mut reexports = BTreeMap::new();
    for line in lib.lines().filter(|line| line.starts_with("pub use ")) {
        let rest = line.trim_start_matches("pub use ").trim_end_matches(';');
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        for name in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            reexports.insert(name.trim().to_owned(), module.to_owned());
        }
    }
    let mut imports = BTreeMap::new();
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).unwrap();
        let module = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if module == "lib" {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        let mut statement = String::new();
        let entry: &mut BTreeSet<String> = imports.entry(module.clone()).or_default();
        for line in text.lines() {
            let line = line.trim();
            if statement.is_empty() && !line.starts_with("use crate::") {
                continue;
            }
            statement.push_str(line);
            if !line.ends_with(';') {
                continue;
            }
            let body = statement.trim_start_matches("use ").trim_end_matches(';');
            let paths: Vec<String> = match body.strip_prefix("crate::{") {
                Some(group) => group
                    .trim_end_matches('}')
                    .split(',')
                    .map(|part| format!("crate::{}", part.trim()))
                    .collect(),
                None => vec![body.to_owned()],
            };
            for path in paths {
                if let Some(target) = module_of(&path, &reexports)
                    && target != module
                {
                    entry.insert(target);
                }
            }
            statement.clear();
        }
    }
    imports
}

#[test]
fn no_import_circle_among_the_engines_files() {
    let imports = engine_imports();
    // Depth-first search for a path back to where it started.
    fn reaches(
        imports: &BTreeMap<String, BTreeSet<String>>,
        from: &str,
        target: &str,
        seen: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> bool {
        for next in imports.get(from).into_iter().flatten() {
            path.push(next.clone());
            if next == target {
                return true;
            }
            if seen.insert(next.clone()) && reaches(imports, next, target, seen, path) {
                return true;
            }
            path.pop();
        }
        false
    }
    assert!(
        imports["worker"].contains("engine"),
        "the scan sees imports: {imports:?}"
    );
    for module in imports.keys() {
        let mut path = vec![module.clone()];
        if reaches(&imports, module, module, &mut BTreeSet::new(), &mut path) {
            panic!("import circle: {}", path.join(" -> "));
        }
    }
}

#[test]
fn the_http_adapter_calls_engine_verbs_not_its_store_or_bus() {
    let src = workspace().join("crates/service-axum/src");
    let mut reaching = Vec::new();
    for file in rust_files(&src) {
        for (number, line) in fs::read_to_string(&file).unwrap().lines().enumerate() {
            if line.contains(".store()") || line.contains(".bus()") {
                reaching.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(reaching.is_empty(), "give the engine a verb: {reaching:?}");
}

#[test]
fn the_postgres_driver_reads_no_row_without_naming_its_column() {
    let src = workspace().join("crates/service-store-postgres/src");
    let mut panicking = Vec::new();
    for file in rust_files(&src) {
        for (number, line) in fs::read_to_string(&file).unwrap().lines().enumerate() {
            // `Row::get` panics on a column that does not decode; `db::Columns` names it.
            if line.contains("row.get(") || line.contains(".get::<") {
                panicking.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        panicking.is_empty(),
        "read rows through db::Columns: {panicking:?}"
    );
}
