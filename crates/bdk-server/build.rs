//! Embeds the project's documentation for `/docs`: `README.md`, `CONTRIBUTING.md` and every
//! `docs/**/*.md` of the workspace, listed into `$OUT_DIR/docs_pages.rs` as `include_str!`s so
//! a new page is picked up without a code change.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("../..");
    let mut files = Vec::new();
    for top in ["README.md", "CONTRIBUTING.md"] {
        if root.join(top).is_file() {
            files.push(top.to_owned());
        }
    }
    collect(&root, Path::new("docs"), &mut files);
    files.sort();
    println!("cargo:rerun-if-changed={}", root.join("docs").display());
    let mut out = String::from(
        "/// (repository path, markdown) of every embedded page.\npub static PAGES: &[(&str, &str)] = &[\n",
    );
    for file in &files {
        let full = root.join(file);
        println!("cargo:rerun-if-changed={}", full.display());
        let _ = writeln!(out, "    ({file:?}, include_str!({:?})),", full.display().to_string());
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("docs_pages.rs");
    if let Err(error) = std::fs::write(&dest, out) {
        panic!("cannot write {}: {error}", dest.display());
    }
}

/// Every `.md` under `root/rel`, as `/`-separated paths relative to `root`.
fn collect(root: &Path, rel: &Path, out: &mut Vec<String>) {
    let dir = root.join(rel);
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    for entry in entries.flatten() {
        let path = rel.join(entry.file_name());
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path.to_string_lossy().replace('\\', "/"));
        }
    }
}
