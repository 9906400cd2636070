//! [`Embed`]: what a program shipping its own `bdk` binary adds to every project the commands
//! see (native Rust tools), and the two places that apply it: discovery, where the tools join
//! the project model (`info`, `validate`, `GET /v1/info`, name clashes), and the registry that
//! `serve`, `run` and `call --dir` mount. It does not parse or run commands.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_project::{Discovery, Project};
use bdk_server::mount::{self, ExtendTools, MountError};
use bdk_tools::{NativeTool, ProjectToolsBuilder, ToolRegistry};

/// Native tools for every project, registered once and handed to [`crate::main_with`].
///
/// ```ignore
/// bdk_cli::main_with(Embed::new().native(Add).native(Dice::seeded(7)))
/// ```
#[derive(Clone)]
pub struct Embed {
    tools: Arc<ExtendTools>,
    /// The registered tools' names, for `Debug`.
    names: Vec<String>,
}

impl Default for Embed {
    fn default() -> Self {
        Self { tools: Arc::new(|builder| builder), names: Vec::new() }
    }
}

impl fmt::Debug for Embed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Embed").field("native", &self.names).finish_non_exhaustive()
    }
}

impl Embed {
    /// Nothing embedded: the plain `bdk`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `tool` in every project's registry (each project gets a clone), listed by
    /// `info` with `source: "native"`. A name a file tool or a built-in already has is a
    /// `name_clash` error diagnostic, so `validate` fails and `serve` refuses the project.
    pub fn native<T: NativeTool + Clone>(mut self, tool: T) -> Self {
        self.names.push(tool.name().to_owned());
        let previous = self.tools;
        self.tools = Arc::new(move |builder| previous(builder).native(tool.clone()));
        self
    }

    /// Any other change to every project's registry builder, applied after the earlier ones
    /// (for tools built per project, or sharing state). Only the native tools it adds are
    /// listed by `info`.
    pub fn extend_tools(
        mut self,
        extend: impl Fn(ProjectToolsBuilder) -> ProjectToolsBuilder + Send + Sync + 'static,
    ) -> Self {
        let previous = self.tools;
        self.tools = Arc::new(move |builder| extend(previous(builder)));
        self
    }

    /// `bdk_project::discover`, with the native tools added to every project's model.
    pub fn discover(&self, dirs: &[PathBuf]) -> Discovery {
        let mut discovery = bdk_project::discover(dirs);
        for project in &mut discovery.projects {
            self.add_native_tools(project);
        }
        discovery
    }

    /// Adds the native tools to `project`'s model (its manifest, its diagnostics).
    pub fn add_native_tools(&self, project: &mut Project) {
        mount::add_native_tools(project, self.tools.as_ref());
    }

    /// What this embedding adds to every agent's registry builder (for `serve --dev` reloads).
    pub fn extender(&self) -> Arc<ExtendTools> {
        self.tools.clone()
    }

    /// The registry a mounted `project` runs with: its own tools plus the native ones.
    pub fn registry(&self, project: &Project, state_dir: &Path) -> Result<Arc<dyn ToolRegistry>, MountError> {
        mount::tools_with(project, state_dir, self.tools.as_ref())
    }

    /// [`Embed::registry`] whose `reminders_*` tools reach the reminders `mount::mount_with`
    /// puts in `slot`.
    pub fn registry_with_reminders(
        &self,
        project: &Project,
        state_dir: &Path,
        slot: &bdk_engine::reminders::tools::ReminderSlot,
    ) -> Result<Arc<dyn ToolRegistry>, MountError> {
        mount::tools_with_reminders(project, state_dir, self.tools.as_ref(), slot)
    }
}
