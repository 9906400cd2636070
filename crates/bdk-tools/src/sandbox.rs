//! Confinement of the model's own code (`local.sandbox = true` in `agent.toml`): the built-in
//! `shell` and agent tools run under Linux Landlock with the session workspace read-write, the
//! system folders read-only, and nothing else; TCP is refused unless `local.sandbox_network`.
//!
//! A child is confined by a launcher rather than a pre-exec hook (which needs `unsafe`): the
//! tool's command becomes `<bdk> sandbox-exec --rw WORKSPACE --ro DIR ... -- PROGRAM ARGS`, and
//! that fresh, single-threaded process calls [`confine_self`] and then `exec`s the program, so
//! the program and everything it starts inherit the ruleset. The launcher is the running `bdk`
//! binary (any binary built on `bdk_cli::main_with` has the hidden subcommand).
//!
//! What it does not cover (docs/formats.md says so): UDP and Unix sockets (Landlock's network
//! rules are TCP only on this ABI), `/proc` reads of the tool's own processes, and command tools,
//! which are the author's own code and run unconfined.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    path_beneath_rules,
};
use tokio::process::Command;

/// The launcher's (hidden) subcommand.
pub const LAUNCHER_SUBCOMMAND: &str = "sandbox-exec";

/// The Landlock ABI the rules are written for (Linux 6.10); newer kernels enforce it fully,
/// older ones as much of it as they know (`restrict_self` reports which).
const TARGET_ABI: ABI = ABI::V5;

/// System folders a confined tool may read and execute from, when they exist.
const SYSTEM_READ_ONLY: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"];

/// Device files a confined tool may read and write.
const DEVICES_READ_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Device files a confined tool may read.
const DEVICES_READ_ONLY: &[&str] = &["/dev/urandom", "/dev/random"];

/// Set by `serve --allow-unconfined` where [`probe`] failed: sandboxes made afterwards run
/// their tools unconfined instead of failing each call.
static ALLOW_UNCONFINED: AtomicBool = AtomicBool::new(false);

/// Makes sandboxes built from now on run unconfined where the kernel cannot confine.
pub fn set_allow_unconfined(allow: bool) {
    ALLOW_UNCONFINED.store(allow, Ordering::Relaxed);
}

/// How an agent's confined tools are launched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// The binary with the `sandbox-exec` subcommand.
    pub launcher: PathBuf,
    /// TCP connect/bind allowed.
    pub network: bool,
    /// Where the kernel cannot confine, run unconfined instead of refusing (`serve
    /// --allow-unconfined`).
    pub allow_unconfined: bool,
    /// Read-only folders besides the workspace: the system folders and the installation prefix
    /// of each `PATH` entry (so `python3` from a version manager still starts).
    pub read_only: Vec<PathBuf>,
}

impl Sandbox {
    /// A sandbox launched by the running executable, reading the system folders and the
    /// prefixes of this process's `PATH`.
    pub fn for_this_process(network: bool) -> std::io::Result<Sandbox> {
        let launcher = std::env::current_exe()?;
        let path = std::env::var_os("PATH").unwrap_or_default();
        let allow_unconfined = ALLOW_UNCONFINED.load(Ordering::Relaxed);
        Ok(Sandbox { launcher, network, allow_unconfined, read_only: read_only_dirs(&path) })
    }

    /// The command that runs `program` confined to `workspace` (add the program's arguments to
    /// it, as to `Command::new(program)`).
    /// Relative paths (a state root given as `.bdk`) are made absolute here, since the launcher
    /// starts in the workspace.
    pub fn command(&self, workspace: &Path, program: impl AsRef<OsStr>) -> Command {
        let absolute = |path: &Path| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let program = Path::new(program.as_ref());
        let program = if program.components().count() > 1 { absolute(program) } else { program.to_path_buf() };
        let mut command = Command::new(&self.launcher);
        command.arg(LAUNCHER_SUBCOMMAND).arg("--rw").arg(absolute(workspace));
        for dir in &self.read_only {
            command.arg("--ro").arg(dir);
        }
        if self.network {
            command.arg("--network");
        }
        if self.allow_unconfined {
            command.arg("--allow-unconfined");
        }
        command.arg("--").arg(program);
        command
    }
}

/// The read-only folders for a `PATH`: the system folders, plus for each `PATH` entry outside
/// them its installation prefix (the folder above a `bin`, `sbin` or `shims` entry, else the
/// entry itself), canonicalized, deduplicated, existing ones only.
pub fn read_only_dirs(path_var: &OsStr) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = SYSTEM_READ_ONLY.iter().map(PathBuf::from).filter(|p| p.exists()).collect();
    for entry in std::env::split_paths(path_var) {
        let Ok(entry) = entry.canonicalize() else { continue };
        let prefix = match entry.file_name().and_then(OsStr::to_str) {
            Some("bin" | "sbin" | "shims") => entry.parent().map(Path::to_path_buf).unwrap_or(entry),
            _ => entry,
        };
        if prefix == Path::new("/") || dirs.iter().any(|d| prefix.starts_with(d)) {
            continue;
        }
        dirs.push(prefix);
    }
    dirs
}

/// What [`confine_self`] enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    pub read_write: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub network: bool,
}

/// Why a process could not be confined.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("this kernel does not enforce Landlock (Linux 5.13 or later with Landlock enabled is needed)")]
    Unsupported,
    #[error("the Landlock ruleset could not be built: {0}")]
    Ruleset(#[from] landlock::RulesetError),
}

/// Restricts the calling process (and everything it starts afterwards) to `confinement`.
/// Call it in a fresh, single-threaded process, right before `exec`.
pub fn confine_self(confinement: &Confinement) -> Result<(), ConfineError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(TARGET_ABI))?;
    if !confinement.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET_ABI))?;
    }
    let status = ruleset
        .create()?
        .add_rules(path_beneath_rules(&confinement.read_only, AccessFs::from_read(TARGET_ABI)))?
        .add_rules(path_beneath_rules(DEVICES_READ_ONLY, AccessFs::from_read(TARGET_ABI)))?
        .add_rules(path_beneath_rules(DEVICES_READ_WRITE, AccessFs::from_all(TARGET_ABI)))?
        .add_rules(path_beneath_rules(&confinement.read_write, AccessFs::from_all(TARGET_ABI)))?
        .restrict_self()?;
    match status.ruleset {
        RulesetStatus::NotEnforced => Err(ConfineError::Unsupported),
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
    }
}

/// Whether this kernel can confine tools: `Err` says why not. Nothing is restricted.
pub fn probe() -> Result<(), ConfineError> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| ruleset.create())
        .map(drop)
        .map_err(|_| ConfineError::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_prefixes_are_read_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join("tools");
        std::fs::create_dir_all(tools.join("bin")).unwrap();
        std::fs::create_dir_all(tools.join("shims")).unwrap();
        let other = dir.path().join("scripts");
        std::fs::create_dir_all(&other).unwrap();
        let path =
            std::env::join_paths([tools.join("bin"), tools.join("shims"), other.clone(), "/usr/bin".into()]).unwrap();
        let dirs = read_only_dirs(&path);
        let tools = tools.canonicalize().unwrap();
        assert_eq!(dirs.iter().filter(|d| **d == tools).count(), 1, "{dirs:?}");
        assert!(dirs.contains(&other.canonicalize().unwrap()), "{dirs:?}");
        assert!(!dirs.iter().any(|d| d.ends_with("usr/bin")), "covered by /usr: {dirs:?}");
    }

    #[test]
    fn the_launcher_command_carries_the_confinement() {
        let sandbox = Sandbox {
            launcher: "/opt/bdk".into(),
            network: false,
            allow_unconfined: false,
            read_only: vec!["/usr".into()],
        };
        let command = sandbox.command(Path::new("/ws"), "sh");
        let args: Vec<_> = command.as_std().get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["sandbox-exec", "--rw", "/ws", "--ro", "/usr", "--", "sh"]);
    }
}
