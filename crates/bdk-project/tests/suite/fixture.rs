//! A builder for small projects on disk. `Fixture::new()` starts from the smallest valid
//! project (`bot/instructions.md`) in a folder named `proj` inside a fresh temporary directory.

use std::fs;
use std::path::{Path, PathBuf};

use bdk_project::{Discovery, Project};
use tempfile::TempDir;

/// The folder the default project is written to; a valid slug, unlike TempDir's `.tmpXXXX`.
pub const PROJECT: &str = "proj";

enum Item {
    File(String, Vec<u8>),
    Dir(String),
    Symlink { link: String, target: String },
    Fifo(String),
}

#[derive(Default)]
pub struct Fixture {
    prefix: Option<String>,
    items: Vec<Item>,
}

impl Fixture {
    /// A valid minimal project under `<tmp>/proj`.
    pub fn new() -> Self {
        Self::bare().file("bot/instructions.md", "You are a test agent.\n")
    }

    /// A project folder under `<tmp>/proj` with nothing in it.
    pub fn bare() -> Self {
        Self { prefix: Some(PROJECT.to_owned()), items: Vec::new() }
    }

    /// Paths are relative to the temporary directory itself (a serve root of projects).
    pub fn serve_root() -> Self {
        Self { prefix: None, items: Vec::new() }
    }

    pub fn file(mut self, path: &str, contents: impl AsRef<[u8]>) -> Self {
        self.items.push(Item::File(path.to_owned(), contents.as_ref().to_vec()));
        self
    }

    pub fn dir(mut self, path: &str) -> Self {
        self.items.push(Item::Dir(path.to_owned()));
        self
    }

    /// A symlink at `link` pointing at `target` (taken verbatim, so it may be relative).
    pub fn symlink(mut self, link: &str, target: &str) -> Self {
        self.items.push(Item::Symlink { link: link.to_owned(), target: target.to_owned() });
        self
    }

    /// A named pipe, made with the `mkfifo` program.
    pub fn fifo(mut self, path: &str) -> Self {
        self.items.push(Item::Fifo(path.to_owned()));
        self
    }

    pub fn build(self) -> Built {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = match &self.prefix {
            Some(prefix) => tmp.path().join(prefix),
            None => tmp.path().to_path_buf(),
        };
        fs::create_dir_all(&dir).expect("project dir");
        for item in self.items {
            match item {
                Item::File(path, bytes) => {
                    let path = dir.join(path);
                    mkdir_parent(&path);
                    fs::write(&path, bytes).expect("write fixture file");
                }
                Item::Dir(path) => fs::create_dir_all(dir.join(path)).expect("mkdir"),
                Item::Symlink { link, target } => {
                    let link = dir.join(link);
                    mkdir_parent(&link);
                    std::os::unix::fs::symlink(target, &link).expect("symlink");
                }
                Item::Fifo(path) => {
                    let path = dir.join(path);
                    mkdir_parent(&path);
                    let status = std::process::Command::new("mkfifo").arg(&path).status().expect("run mkfifo");
                    assert!(status.success(), "mkfifo failed");
                }
            }
        }
        Built { _tmp: tmp, dir }
    }

    /// Builds and loads the project (single-project mode, as `bdk validate --dir proj` does).
    pub fn load(self) -> (Built, Project) {
        let built = self.build();
        let project = built.load();
        (built, project)
    }
}

fn mkdir_parent(path: &Path) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir parent");
    }
}

/// A fixture on disk. Dropping it removes the files.
pub struct Built {
    /// Held so the files live as long as the fixture.
    _tmp: TempDir,
    /// The project folder (or the serve root for `Fixture::serve_root`).
    pub dir: PathBuf,
}

impl Built {
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Discovers `dir` the way `--dir` does and expects exactly one project.
    pub fn load(&self) -> Project {
        let mut discovery = self.discover();
        assert!(discovery.diagnostics.is_empty(), "host diagnostics: {:#?}", discovery.diagnostics);
        assert_eq!(discovery.projects.len(), 1, "one project");
        discovery.projects.remove(0)
    }

    pub fn discover(&self) -> Discovery {
        bdk_project::discover(std::slice::from_ref(&self.dir))
    }
}
